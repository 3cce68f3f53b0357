"""ledger.consuming.consumers.consumer_info (lag, last activity). Retention ages: tests/util/test_duration.py."""

from __future__ import annotations

from minikafka.ledger.consuming import consumer_info
from tests.conftest import Video


def test_consumer_info_reports_lag_and_last_activity_per_consumer(source):
    t = source.topic("videos", Video, dedup=None)
    t.extend([{"creator": "c", "url": f"u{i}", "length_seconds": i} for i in range(4)])
    t.consumer("a")
    t.consumer("b")
    t.set_handled(1, consumer="a")
    info = {i.name: i for i in consumer_info(source._ledger.conn, "videos")}
    assert (info["a"].lag, info["b"].lag) == (3, 4)
    assert info["a"].last_activity is not None and info["b"].last_activity is None


def test_a_sole_consumers_last_activity_is_its_last_handled_row(source):
    t = source.topic("videos", Video, dedup=None)
    t.append({"creator": "c", "url": "u", "length_seconds": 1})
    t.consumer("only")
    t.set_handled(1, consumer="only")
    [info] = consumer_info(source._ledger.conn)
    assert info.lag == 0 and info.last_activity == t.get(1).handled_at.isoformat().replace("+00:00", "Z")

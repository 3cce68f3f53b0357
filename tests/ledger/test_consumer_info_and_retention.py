"""ledger.consumers.consumer_info (lag, last activity) and ledger.runlog_retention."""

from __future__ import annotations

from datetime import timedelta

import pytest

from minikafka.ledger.consumers import consumer_info
from minikafka.ledger.runlog_retention import InvalidAgeError, parse_age
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


@pytest.mark.parametrize("text, age", [("30d", timedelta(days=30)), ("12h", timedelta(hours=12)),
                                       ("2w", timedelta(weeks=2)), (" 90 m ", timedelta(minutes=90))])
def test_ages_read_a_number_and_a_unit(text, age):
    assert parse_age(text) == age


@pytest.mark.parametrize("text", ["30", "d", "-1d", "1y", "1.5d", ""])
def test_bad_ages_are_refused(text):
    with pytest.raises(InvalidAgeError, match="30d"):
        parse_age(text)

"""A ledger written by the first format opens, is upgraded once, and keeps its ack state.

``tests/data/ledger_format1.sqlite`` was written by minikafka before partitions: topic
``videos`` (5 rows), consumers ``a`` (acked rows 1-3) and ``b`` (acked row 1).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from minikafka import LedgerError, Source
from minikafka.ledger.transactions import LEDGER_FORMAT
from tests.api.modes.test_groups import Order
from tests.conftest import Video

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "ledger_format1.sqlite"


@pytest.fixture
def old_file(tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, path)
    return str(path)


def test_a_format_1_file_opens_upgraded_with_its_state_intact(old_file):
    with Source(old_file) as src:
        videos = src.topic("videos", Video, dedup=("url",))
        assert videos.partitions == 1
        assert videos.count("new", consumer="a") == 2 and videos.count("new", consumer="b") == 4
        assert videos.count("handled") == 1 and videos.consumers() == ["a", "b"]
        assert [r.partition for r in videos.iter_new(records=True)] == [0, 0, 0, 0]
    conn = sqlite3.connect(old_file)
    assert conn.execute("SELECT value FROM _minikafka_meta WHERE key = 'format'").fetchone() == (str(LEDGER_FORMAT),)
    assert "_partition" in {r[1] for r in conn.execute('PRAGMA table_info("videos")')}
    # a one-partition topic has no partition index (format 5)
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'videos__partition'").fetchone() == (0,)


def test_an_upgraded_file_keeps_working_for_appends_acks_and_groups(old_file):
    with Source(old_file) as src:
        videos = src.topic("videos", Video, dedup=("url",))
        videos.append({"creator": "c", "url": "u5", "length_seconds": 5})
        for rec in videos.iter_new(records=True, consumer="b"):
            rec.ack()
        for rec in videos.iter_new(records=True, consumer="a"):
            rec.ack()
        assert videos.count("handled") == 6
        assert src._ledger.conn.execute("SELECT count(*) FROM _minikafka_acks").fetchone() == (0,)
        group = src.group("g")
        assert [r.offset for r in group.fetch(videos, 0, 2)] == [1, 2]
        group.commit(videos, 0, 6)
    with Source(old_file) as src:  # a second open finds nothing left to upgrade
        assert src.group("g").committed("videos", 0) == 6


# ``tests/data/ledger_format2.sqlite`` (written by tests/data/make_ledger_format2.py before
# format 3): what every consumer had pending and which rows were handled topic-wide, as the
# format-2 API read them (its raw ``_status`` column said 'new' for videos 1-4, which every consumer had done).
FORMAT2 = Path(__file__).resolve().parents[1] / "data" / "ledger_format2.sqlite"
FORMAT2_PENDING = {"videos": {"enrich": [7, 8, 9], "archive": [5, 6, 7, 9]},
                   "orders": {"g": [1, 2, 4, 5, 6, 8, 9]}, "history": {}, "videos.out": {}}
FORMAT2_HANDLED = {"videos": [1, 2, 3, 4, 10], "orders": [3, 7], "history": [1, 2, 3, 5], "videos.out": []}


@pytest.fixture
def format2(tmp_path):
    path = tmp_path / "format2.sqlite"
    shutil.copy(FORMAT2, path)
    return str(path)


def _views(path: str) -> tuple[dict, dict]:
    """Topic-wide handled ids and per-consumer pending ids, read with plain sqlite3 from the views."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        handled, pending = {}, {}
        for (topic,) in conn.execute("SELECT name FROM _minikafka_topics ORDER BY name"):
            handled[topic] = [r[0] for r in conn.execute(
                f"SELECT _id FROM \"{topic}:status\" WHERE _status = 'handled' ORDER BY _id")]
            pending[topic] = {}
            for consumer, row_id in conn.execute(
                    f"SELECT consumer, _id FROM \"{topic}:consumers\" WHERE _status = 'new' ORDER BY consumer, _id"):
                pending[topic].setdefault(consumer, []).append(row_id)
        return handled, pending
    finally:
        conn.close()


def test_a_format_2_ledger_is_upgraded_in_place_with_every_consumers_state_and_the_topic_status(format2):
    with Source(format2) as src:
        assert src._ledger.upgraded_from == 2
        for topic, consumers in FORMAT2_PENDING.items():
            t = src.topic(topic, Video if topic.startswith("videos") else Order, dedup=None if topic in (
                "orders", "history") else ("url",), partitions=3 if topic == "orders" else 1)
            assert sorted(t.consumers()) == sorted(consumers)
            for consumer, ids in consumers.items():
                assert [r.id for r in t.iter_new(records=True, consumer=consumer)] == ids
            assert [r.id for r in t.iter_handled(records=True)] == FORMAT2_HANDLED[topic]
    conn = sqlite3.connect(format2)
    assert conn.execute("SELECT value FROM _minikafka_meta WHERE key = 'format'").fetchone() == (str(LEDGER_FORMAT),)
    for topic in FORMAT2_PENDING:
        columns = {r[1] for r in conn.execute(f'PRAGMA table_info("{topic}")')}
        assert "_status" not in columns and "_handled_at" not in columns and "_partition" in columns
        assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = ?", (topic + "__new",)).fetchone() == (0,)
    conn.close()
    assert _views(format2) == (FORMAT2_HANDLED, {t: c for t, c in FORMAT2_PENDING.items()})


def test_stage_commits_move_only_positions_after_the_upgrade_and_the_views_follow(format2):
    from minikafka.ledger.consuming import RunResult
    from minikafka.ledger.transactions import InputState, commit_stage

    with Source(format2) as src:
        src.topic("videos", Video, dedup=("url",))
        for consumer in ("enrich", "archive"):
            run = RunResult(f"after-{consumer}", "stage", stage=consumer, consumer=consumer, inputs=["videos"])
            pending = len(FORMAT2_PENDING["videos"][consumer])
            commit_stage(src._ledger, run, consumer=consumer, inputs=[InputState("videos", 10, pending)], outputs=[])
        history = src.topic("history", Order, dedup=None)
        history.extend([{"user": "h", "n": 9}], status="handled")  # row 4 is still new: 5 and 6 are marks
        assert src._ledger.conn.execute("SELECT row_id FROM _minikafka_handled ORDER BY row_id").fetchall() == [
            (5,), (6,)]
        history.set_handled(4)  # the gap closes: the position passes 4, 5 and 6, the marks go
        assert src._ledger.conn.execute("SELECT count(*) FROM _minikafka_handled").fetchone() == (0,)
    handled, pending = _views(format2)
    assert handled["videos"] == list(range(1, 11)) and pending["videos"] == {}
    assert handled["history"] == [1, 2, 3, 4, 5, 6]


def test_an_upgrade_that_cannot_finish_names_the_reason_and_changes_nothing(format2):
    conn = sqlite3.connect(format2)
    conn.execute("CREATE VIEW my_new AS SELECT * FROM videos WHERE _status = 'new'")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="removes column _status of topic 'videos'.*my_new.*Nothing was changed"):
        Source(format2)
    conn = sqlite3.connect(format2)
    assert conn.execute("SELECT value FROM _minikafka_meta WHERE key = 'format'").fetchone() == ("2",)
    assert conn.execute("SELECT count(*) FROM videos WHERE _status = 'new'").fetchone() == (9,)
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '_minikafka_handled'"
                        ).fetchone() == (0,)

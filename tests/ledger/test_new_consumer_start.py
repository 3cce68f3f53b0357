"""One rule for a new consumer, whatever kind: start='earliest' (default) or 'latest'.

earliest: every row of the topic is pending for it, except rows handled for every
consumer (topic-wide acks, rows appended as history). latest: only rows appended after
it registered. An existing consumer keeps its position, whatever start says.
"""

from __future__ import annotations

import pytest

from minikafka import InvalidSettingError
from tests.conftest import Video


def fill(videos, lo, hi):
    videos.extend([{"creator": "c", "url": f"u{i}", "length_seconds": i} for i in range(lo, hi)])


def copy(videos, consumer, **kwargs):
    """Run a pipe copying ``videos`` rows into topic ``out``; return the urls it consumed."""
    out = videos.source.topic("out", Video, dedup=None)
    return [v.url for v in videos.pipe(lambda v: v, consumer=consumer, **kwargs).to(out).run()]


def test_a_pipe_added_after_another_pipe_handled_every_row_still_sees_every_row(videos):
    fill(videos, 0, 5)
    assert len(copy(videos, "first")) == 5 and videos.count("new") == 0
    assert copy(videos, "late") == [f"u{i}" for i in range(5)]
    assert videos.count("new") == 0 and videos.count("handled") == 5


def test_a_pipe_with_start_latest_sees_only_rows_appended_after_it_registered(videos):
    fill(videos, 0, 5)
    assert copy(videos, "tail", start="latest") == []
    fill(videos, 5, 7)
    assert copy(videos, "tail", start="latest") == ["u5", "u6"]
    assert videos.count("new", consumer="tail") == 0


def test_a_group_starts_at_the_beginning_of_the_log_or_after_its_last_row_with_start_latest(source, videos):
    fill(videos, 0, 4)
    copy(videos, "done-it-all")
    early, late = source.group("early"), source.group("late", start="latest")
    assert early.lag(videos) == {0: 4} and late.lag(videos) == {0: 0}  # before either registers
    assert [r.offset for r in early.fetch(videos)] == [1, 2, 3, 4]
    assert late.fetch(videos) == [] and late.committed(videos, 0) == 4
    fill(videos, 4, 6)
    assert [r.offset for r in late.fetch(videos)] == [5, 6]


def test_every_kind_of_new_consumer_skips_rows_handled_for_every_consumer(source, videos):
    videos.extend([{"creator": "h", "url": f"h{i}", "length_seconds": i} for i in range(3)], status="handled")
    fill(videos, 0, 2)
    videos.set_handled(4)  # handled for every consumer, present and future
    assert copy(videos, "pipe") == ["u1"]
    assert [r.offset for r in source.group("group").fetch(videos)] == [5]
    videos.consumer("named")
    assert [r.id for r in videos.iter_new(records=True, consumer="named")] == [5]


def test_start_applies_once_an_existing_consumer_keeps_its_position(source, videos):
    fill(videos, 0, 3)
    videos.consumer("a", start="latest")
    fill(videos, 3, 4)
    videos.consumer("a")  # the default start changes nothing now
    assert [r.id for r in videos.iter_new(records=True, consumer="a")] == [4]
    source.group("a", start="earliest").fetch(videos)
    assert source.group("a").committed(videos, 0) == 3


def test_a_start_that_is_neither_earliest_nor_latest_is_refused_naming_it(source, videos):
    for make in (lambda: videos.consumer("x", start="newest"), lambda: source.group("x", start="newest"),
                 lambda: videos.pipe(lambda v: v, consumer="x", start="newest")):
        with pytest.raises(InvalidSettingError, match="start must be 'earliest'.*'newest'"):
            make()
    assert videos.consumers() == []


def test_history_appended_as_handled_moves_the_handled_position_not_a_row_per_message(source, videos):
    videos.extend([{"creator": "h", "url": f"h{i}", "length_seconds": i} for i in range(1000)], status="handled")
    conn = source._ledger.conn
    assert conn.execute("SELECT handled_upto FROM _minikafka_partitions WHERE topic = 'videos'").fetchone() == (1000,)
    assert conn.execute("SELECT count(*) FROM _minikafka_handled").fetchone() == (0,)
    assert videos.count("handled") == 1000 and videos.count("new") == 0


def test_an_insert_stores_no_status_a_row_appended_as_handled_is_marked_after_it(source, videos):
    from minikafka.ledger.topics import insert_params

    row = videos.rows.encode(Video(creator="c", url="x", length_seconds=1))
    assert insert_params([row], "2026-01-01T00:00:00.000000Z") == [(*row, "2026-01-01T00:00:00.000000Z")]
    assert "_status" not in videos.layout.insert_sql()
    videos.extend([{"creator": "c", "url": "x", "length_seconds": 1}], status="handled")
    assert videos.count("handled") == 1 and videos.count("new") == 0

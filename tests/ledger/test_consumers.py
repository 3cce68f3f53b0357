"""Named consumers: independent ack state; a row is handled once every consumer acked it."""

from __future__ import annotations

import pytest

from minikafka import ConsumerNotFoundError, InvalidNameError


def fill(videos, n=5):
    videos.extend([{"creator": "c", "url": f"u{i}", "length_seconds": i} for i in range(n)])


def test_two_consumers_each_see_every_row_once(videos):
    fill(videos)
    videos.consumer("split")
    videos.consumer("articles")
    for rec in videos.iter_new(records=True, consumer="split"):
        rec.ack()
    assert videos.count("new", consumer="split") == 0
    assert videos.count("new", consumer="articles") == 5
    assert videos.count("new") == 5  # not handled until every consumer acked
    for rec in videos.iter_new(records=True, consumer="articles"):
        rec.ack()
    assert videos.count("handled") == 5
    assert videos.source._ledger.conn.execute("SELECT count(*) FROM _minikafka_acks").fetchone() == (0,)


def test_one_consumer_failing_does_not_make_the_other_reprocess(videos):
    fill(videos, 3)
    videos.consumer("a")
    videos.consumer("b")
    for rec in videos.iter_new(records=True, consumer="a"):
        rec.ack()
    # b fails half-way: acks one row only
    next(videos.iter_new(records=True, consumer="b")).ack()
    assert videos.count("new", consumer="a") == 0
    assert [r.id for r in videos.iter_new(records=True, consumer="b")] == [2, 3]
    assert [r.id for r in videos.iter_handled(records=True, consumer="b")] == [1]


def test_a_late_consumer_starts_from_what_is_still_new(videos):
    fill(videos, 4)
    videos.set_handled(1)
    videos.consumer("late")
    assert videos.count("new", consumer="late") == 3


def test_replay_reopens_a_range_for_one_consumer_only(videos):
    fill(videos, 5)
    videos.consumer("a")
    videos.consumer("b")
    for c in ("a", "b"):
        for rec in videos.iter_new(records=True, consumer=c):
            rec.ack()
    assert videos.replay("a", from_id=2, to_id=3) == 2
    assert [r.id for r in videos.iter_new(records=True, consumer="a")] == [2, 3]
    assert videos.count("new", consumer="b") == 0
    for rec in videos.iter_new(records=True, consumer="a"):
        rec.ack()
    assert videos.count("handled") == 5


def test_replay_with_a_single_consumer_and_whole_topic(videos):
    fill(videos, 3)
    videos.consumer("only")
    for rec in videos.iter_new(records=True, consumer="only"):
        rec.ack()
    assert videos.replay("only") == 3
    assert videos.count("new", consumer="only") == 3


def test_drop_consumer_completes_rows_the_others_acked(videos):
    fill(videos, 2)
    videos.consumer("a")
    videos.consumer("b")
    for rec in videos.iter_new(records=True, consumer="a"):
        rec.ack()
    videos.drop_consumer("b")
    assert videos.count("handled") == 2 and videos.consumers() == ["a"]


def test_unknown_and_bad_consumers(videos):
    with pytest.raises(ConsumerNotFoundError, match="'ghost'"):
        list(videos.iter_new(consumer="ghost"))
    with pytest.raises(ConsumerNotFoundError):
        videos.replay("ghost")
    with pytest.raises(InvalidNameError, match="consumer"):
        videos.consumer("bad name")
    with pytest.raises(ValueError, match="greater"):
        videos.consumer("ok") and videos.replay("ok", from_id=5, to_id=1)


def test_topic_wide_set_handled_acks_for_every_consumer(videos):
    fill(videos, 1)
    videos.consumer("a")
    videos.consumer("b")
    videos.set_handled(1)
    assert videos.count("new", consumer="a") == 0 and videos.count("new", consumer="b") == 0

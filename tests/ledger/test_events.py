"""on_event: fired after the commit it reports, never for rolled-back work; errors swallowed."""

from __future__ import annotations

import pytest

from minikafka import DuplicateMessageError, Source
from tests.conftest import Cleaned, Video


def row(n):
    return {"creator": "c", "url": f"u{n}", "length_seconds": n}


def test_events_are_delivered_after_commit_and_see_committed_rows(db_path):
    seen = []

    def observer(event):
        if event.name == "message_appended":
            # a second connection sees the row: it is committed
            with Source(db_path) as other:
                seen.append(other.topic("videos", Video, dedup=None).count())
        else:
            seen.append(event.name)

    with Source(db_path, on_event=observer) as src:
        t = src.topic("videos", Video, dedup=None)
        t.append(row(1))
    assert seen == ["topic_created", 1]


def test_failed_writes_emit_nothing(source):
    events = []
    source.on_event = events.append
    t = source.topic("videos", Video, dedup=("url",))
    t.append(row(1))
    events.clear()
    with pytest.raises(DuplicateMessageError):
        t.extend([row(2), row(1)])
    with pytest.raises(DuplicateMessageError):
        t.append(row(1))
    assert events == []


def test_observer_exceptions_are_swallowed(source):
    def broken(event):
        raise RuntimeError("observer bug")

    source.on_event = broken
    t = source.topic("videos", Video, dedup=None)
    t.append(row(1))
    assert t.count() == 1


def test_pipeline_events_in_order_with_details(source):
    events = []
    videos = source.topic("videos", Video, dedup=None)
    cleaned = source.topic("cleaned", Cleaned, dedup=None)
    videos.extend([row(60), row(120)])
    source.on_event = events.append
    videos.pipe(lambda v: Cleaned(creator=v.creator, url=v.url, duration_min=1)).to(cleaned).run()
    names = [e.name for e in events]
    assert names[0] == "pipeline_start" and names[-1] == "pipeline_end"
    assert names.count("message_appended") == 2 and names.count("message_handled") == 2
    handled = [e for e in events if e.name == "message_handled"]
    assert [e.record_id for e in handled] == [1, 2] and handled[0].topic == "videos"
    assert events[-1].details["rows_out"] == 2


def test_extend_emits_one_event_per_row_with_ids(source):
    events = []
    t = source.topic("videos", Video, dedup=None)
    source.on_event = events.append
    t.extend([row(i) for i in range(3)])
    assert [(e.name, e.record_id) for e in events] == [("message_appended", i) for i in (1, 2, 3)]


def test_ack_emits_once(videos):
    events = []
    videos.append(row(1))
    videos.source.on_event = events.append
    rec = next(videos.iter_new(records=True))
    rec.ack()
    rec.ack()
    assert [e.name for e in events] == ["message_handled"]

"""api.quarantine.requeue and ledger.consuming.quarantine: put dead-lettered rows back, or purge them."""

from __future__ import annotations

import pytest

from minikafka.api.core.requeue import requeue
from minikafka.errors import MinikafkaError
from minikafka.ledger.consuming import quarantine as store
from minikafka.util.clock import utc_now


def _dead(source, payload, origin="f.jsonl:1"):
    with source._ledger.atomic() as conn:
        conn.execute("INSERT INTO _minikafka_quarantine (topic, payload, reason, origin, created_at) "
                     "VALUES ('videos', ?, 'bad', ?, ?)", (payload, origin, utc_now()))


def test_requeue_appends_valid_rows_counts_duplicates_and_keeps_failures(source, videos):
    videos.append({"creator": "c", "url": "dup", "length_seconds": 1})
    _dead(source, '{"creator": "c", "url": "new", "length_seconds": 2}')
    _dead(source, '{"creator": "c", "url": "dup", "length_seconds": 1}')
    _dead(source, '{"creator": "c"', origin="f.jsonl:3")
    result = requeue(videos)
    assert (result.appended, result.duplicates, result.requeued) == (1, 1, 2)
    [(qid, reason)] = result.failed
    assert reason.startswith("still malformed JSON")
    assert [r["id"] for r in store.list_quarantined(source._ledger.conn, "videos")] == [qid]
    assert videos.count() == 2


def test_requeue_of_an_unknown_id_changes_nothing(source, videos):
    _dead(source, '{"creator": "c", "url": "x", "length_seconds": 2}')
    with pytest.raises(MinikafkaError, match=r"no quarantined row\(s\) \[99\]"):
        requeue(videos, [1, 99])
    assert videos.count() == 0 and store.count_quarantined(source._ledger.conn, "videos") == 1

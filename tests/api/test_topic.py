"""Appending, bulk appends, reading, acking and counting."""

from __future__ import annotations

import threading

import pytest
from pydantic import ValidationError

from minikafka import (
    DuplicateMessageError,
    RecordNotFoundError,
    Source,
    SourceClosedError,
    UnknownStatusError,
    WrongThreadError,
)
from tests.conftest import Video


def v(n: int, **over) -> dict:
    return {"creator": f"c{n}", "url": f"https://x/{n}", "length_seconds": n, **over}


def test_append_returns_the_validated_model(videos):
    got = videos.append(v(1, length_seconds="90"))
    assert got == Video(creator="c1", url="https://x/1", length_seconds=90)


def test_append_on_duplicate_ignore_returns_none(videos):
    videos.append(v(1))
    assert videos.append(v(1), on_duplicate="ignore") is None
    assert videos.count() == 1


def test_dedup_none_allows_repeats(source):
    t = source.topic("free", Video, dedup=None)
    t.append(v(1))
    t.append(v(1))
    assert t.count() == 2


def test_multi_field_dedup_treats_none_as_a_value(source):
    from pydantic import BaseModel

    class Tagged(BaseModel):
        a: str
        b: str | None

    t = source.topic("tagged", Tagged, dedup=("a", "b"))
    t.append({"a": "x", "b": None})
    t.append({"a": "x", "b": "y"})
    with pytest.raises(DuplicateMessageError):
        t.append({"a": "x", "b": None})


def test_extend_is_atomic_on_an_invalid_row(videos):
    videos.append(v(0))
    with pytest.raises(ValidationError, match=r"2\.length_seconds"):
        videos.extend([v(1), v(2), v(3, length_seconds="long")])
    assert videos.count() == 1


def test_extend_is_atomic_on_a_duplicate_inside_the_batch(videos):
    with pytest.raises(DuplicateMessageError, match=r"row 2.*earlier in the same batch") as info:
        videos.extend([v(1), v(2), v(1)])
    assert info.value.row == 2 and info.value.key == {"url": "https://x/1"}
    assert videos.count() == 0


def test_extend_names_the_row_already_in_the_topic(videos):
    videos.append(v(5))
    with pytest.raises(DuplicateMessageError, match=r"row 1.*already in the topic"):
        videos.extend([v(4), v(5), v(6)])
    assert videos.count() == 1


def test_extend_can_skip_duplicates_and_load_history_as_handled(videos):
    videos.append(v(1))
    assert videos.extend([v(1), v(2), v(3)], on_duplicate="ignore", status="handled") == 2
    assert videos.count("new") == 1 and videos.count("handled") == 2


def test_extend_accepts_models_generators_and_mixtures(videos):
    assert videos.extend(x for x in [Video(**v(1)), v(2)]) == 2
    assert [r.url for r in videos.iter_new()] == ["https://x/1", "https://x/2"]


def test_iter_new_records_and_dicts(videos):
    videos.extend([v(1), v(2)])
    recs = list(videos.iter_new(records=True))
    assert [r.id for r in recs] == [1, 2] and recs[0].status == "new" and recs[0].handled_at is None
    assert list(videos.iter_new(as_dict=True))[1] == v(2)
    with pytest.raises(ValueError, match="both"):
        list(videos.iter_new(records=True, as_dict=True))


def test_ack_while_iterating_is_safe_and_idempotent(videos):
    videos.extend([v(i) for i in range(2500)])
    seen = 0
    for rec in videos.iter_new(records=True):
        rec.ack()
        rec.ack()
        seen += 1
    assert seen == 2500 and videos.count("new") == 0
    assert rec.status == "handled" and rec.handled_at is not None


def test_rows_appended_during_iteration_wait_for_the_next_pass(videos):
    videos.extend([v(1), v(2)])
    got = []
    for item in videos.iter_new():
        got.append(item.url)
        videos.append(v(100 + len(got)))
    assert got == ["https://x/1", "https://x/2"]
    assert videos.count("new") == 4


def test_set_handled_by_id_or_record_and_iter_handled(videos):
    videos.extend([v(1), v(2), v(3)])
    videos.set_handled(1)
    videos.set_handled(record=videos.get(3))
    assert [x.url for x in videos.iter_handled()] == ["https://x/1", "https://x/3"]
    with pytest.raises(RecordNotFoundError, match="99"):
        videos.set_handled(99)
    with pytest.raises(ValueError, match="requires _id or record"):
        videos.set_handled()


def test_count_rejects_unknown_status(videos):
    with pytest.raises(UnknownStatusError, match="'done'"):
        videos.count("done")
    with pytest.raises(UnknownStatusError):
        list(videos.rows.scan("pending", None))


def test_ids_are_monotonic_and_survive_reopen(db_path):
    with Source(db_path) as src:
        t = src.topic("videos", Video, dedup=("url",))
        t.extend([v(1), v(2)])
    with Source(db_path) as src:
        t = src.topic("videos", Video, dedup=("url",))
        t.append(v(3))
        assert [r.id for r in t.iter_new(records=True)] == [1, 2, 3]


def test_closed_source_raises(source, videos):
    source.close()
    with pytest.raises(SourceClosedError, match="closed"):
        videos.append(v(1))
    source.close()  # idempotent


def test_use_from_another_thread_raises(videos):
    errors = []

    def worker():
        try:
            videos.append(v(1))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert isinstance(errors[0], WrongThreadError)
    assert videos.count() == 0


def test_new_row_reads_are_a_rowid_range_from_the_lowest_position_without_an_index_on_new_rows(source, videos):
    from minikafka.ledger.topics import acks

    videos.consumer("a")
    conn = source._ledger.conn
    for consumer_id in (None, acks.find_consumer(conn, "videos", "a")):
        where, params = acks.pending_filter(consumer_id, "videos")
        plan = conn.execute(f'EXPLAIN QUERY PLAN SELECT "_id" FROM "videos" WHERE {where} ORDER BY "_id"',
                            params).fetchall()
        assert plan[0][3] == "SEARCH videos USING INTEGER PRIMARY KEY (rowid>?)"
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'videos__new'").fetchone() == (0,)


def test_file_ledger_uses_wal_and_full_sync(file_source):
    conn = file_source._ledger.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30000

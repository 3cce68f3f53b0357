"""append returns its offset; extend its first offset and count; single appends from many
threads join one group commit, each returning once its own row is durable."""

from __future__ import annotations

import pickle
import sqlite3
import threading
import time

from pydantic import BaseModel

from minikafka import DuplicateMessageError, Offset, Source, offset_of
from minikafka.ledger.transactions import group_commit
from tests.conftest import Video


class Reading(BaseModel):
    sensor: str
    n: int


def v(n: int) -> dict:
    return {"creator": f"c{n}", "url": f"https://x/{n}", "length_seconds": n}


def test_append_returns_the_model_carrying_the_stored_rows_offset(file_source):
    videos = file_source.topic("videos", Video, dedup=("url",))
    first = videos.append(v(1))
    second = videos.append(v(2), group=False)
    assert first == Video(**v(1)) and Video(**v(1)) == first and isinstance(first, Video)
    assert first.offset == Offset(id=1, partition=0) and offset_of(second) == Offset(2, 0)
    assert pickle.loads(pickle.dumps(first)) == Video(**v(1))
    with file_source.transaction() as tx:
        third = videos.append(v(3), tx=tx)
    assert third.offset.id == 3


def test_append_offset_names_the_partition_the_row_went_to(file_source):
    readings = file_source.topic("readings", Reading, dedup=None, partitions=4, key=("sensor",))
    got = readings.append({"sensor": "a", "n": 1})
    stored = readings.get(got.offset.id)
    assert got.offset.partition == stored.partition


def test_extend_returns_the_count_with_the_first_offset(file_source):
    videos = file_source.topic("videos", Video, dedup=("url",))
    videos.append(v(1))
    got = videos.extend([v(2), v(3)])
    assert got == 2 and got.count == 2 and got.first == 2
    assert videos.extend([v(3)], on_duplicate="ignore").first is None


def _wait_for(predicate, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.001)


def _held_write_lock(path: str) -> sqlite3.Connection:
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    return blocker


def _append_in_threads(path: str, payloads: list[dict], dedup=None):
    """Append each payload from its own thread (one Source each) while another connection holds
    the write lock, so that all of them queue before the first commit; returns (results, committer)."""
    with Source(path) as owner:
        owner.topic("readings", Reading, dedup=dedup)
        results: dict[int, object] = {}
        keeper = Source(path)  # makes the process's committer and keeps it while threads come and go
        keeper.ledger.group_commit(lambda conn: None)
        blocker = _held_write_lock(path)
        sources: list[Source] = []

        def run(i: int, payload: dict) -> None:
            src = Source(path)
            sources.append(src)
            try:
                results[i] = src.topic("readings", Reading, dedup=dedup).append(payload)
            except Exception as exc:
                results[i] = exc

        threads = [threading.Thread(target=run, args=(i, p)) for i, p in enumerate(payloads)]
        for t in threads:
            t.start()
        committer = group_commit._committers[group_commit._key(path)]
        _wait_for(lambda: len(committer._queue) + (1 if committer._leading else 0) >= len(payloads))
        commits_before = committer.commits
        assert not results  # nobody returned before the commit
        blocker.execute("ROLLBACK")
        blocker.close()
        for t in threads:
            t.join()
        commits = committer.commits - commits_before
        for src in sources:
            src.close()
        keeper.close()
    return results, commits


def test_single_appends_from_many_threads_join_one_durable_commit(db_path):
    payloads = [{"sensor": f"s{i}", "n": i} for i in range(20)]
    results, commits = _append_in_threads(db_path, payloads)
    assert commits <= 2  # the first leader's batch (maybe alone) and everyone who queued behind it
    ids = sorted(r.offset.id for r in results.values())
    assert len(set(ids)) == 20
    with Source(db_path) as src:
        assert src.topic("readings", Reading, dedup=None).count() == 20


def test_a_duplicate_in_a_group_commit_fails_only_its_own_caller(db_path):
    with Source(db_path) as src:
        src.topic("readings", Reading, dedup=("sensor",)).append({"sensor": "taken", "n": 0})
    payloads = [{"sensor": f"s{i}", "n": i} for i in range(8)] + [{"sensor": "taken", "n": 99}]
    results, commits = _append_in_threads(db_path, payloads, dedup=("sensor",))
    assert isinstance(results[8], DuplicateMessageError)
    assert all(isinstance(results[i], Reading) for i in range(8))
    with Source(db_path) as src:
        assert src.topic("readings", Reading, dedup=("sensor",)).count() == 9


def test_flush_returns_once_nothing_is_queued(file_source):
    t = file_source.topic("readings", Reading, dedup=None)
    t.append({"sensor": "a", "n": 1})
    t.flush()
    file_source.flush()
    assert t.count() == 1


def test_appends_of_a_memory_source_commit_on_its_own_connection(source):
    t = source.topic("readings", Reading, dedup=None)
    assert t.append({"sensor": "a", "n": 1}).offset == Offset(1, 0)
    assert group_commit._key(":memory:") not in group_commit._committers


def test_group_commit_can_be_turned_off_per_source(db_path):
    with Source(db_path, group_commit=False) as src:
        src.topic("readings", Reading, dedup=None).append({"sensor": "a", "n": 1})
        assert src.ledger._committer is None

"""The commit reads a stage's output while Spark still writes it (``spark/stages/follow.py``).

What must hold: the same rows, ids, lineage and counts as a commit that starts after the
write; rows in partition order whatever order the tasks finish in; a partition that wrote
nothing passed over only at the end; a failing write or a short read commits nothing.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import minikafka.spark.stages.stage as stage_module
from minikafka import StagingError
from minikafka.spark import Stage, StageFailed, run_stage
from minikafka.spark.stages.follow import FollowedWrite
from tests.spark.test_stage import Item, Summary, add, ledger, summarise  # noqa: F401 (ledger: fixture)

pytestmark = pytest.mark.spark


def _stored(src) -> list[tuple]:
    return src.ledger.conn.execute(
        'SELECT "_id", url, words, "_parent_id", "_parent_topic" FROM summaries ORDER BY "_id"').fetchall()


def _spread(df):  # several Spark partitions, and keys repeated across them (the earliest row wins)
    return df.repartitionByRange(4, "_id").select(
        "_id", (F.col("n") % 700).cast("string").alias("url"), F.size(F.split("title", " ")).cast("long").alias("words"))


@pytest.mark.parametrize("follow", [True, False])
def test_a_followed_commit_stores_what_a_commit_after_the_write_stores(spark, tmp_path, monkeypatch, follow):
    from minikafka import Source

    monkeypatch.setattr(stage_module, "FOLLOW_WRITE", follow)
    path = str(tmp_path / f"{follow}.sqlite")
    with Source(path) as src:
        src.topic("items", Item, dedup=("url",))
        src.topic("summaries", Summary, dedup=("url",))
        add(src, [(f"u{i}", "a b" if i % 3 else "c") for i in range(3000)])
        result = run_stage(spark, src, Stage("spread", ["items"], ["summaries"], transform=_spread),
                           commit_batch_rows=250)
        assert (result.status, result.rows_in, result.rows_out, result.rows_duplicate) == ("succeeded", 3000, 700,
                                                                                           2300)
        assert result.details.get("commit_overlaps_spark", False) is follow
        rows = _stored(src)
    # the earliest row of each key won, in id order: key k comes from item k + 1 (n = k)
    assert [r[1] for r in rows] == [str(k) for k in range(700)]
    assert [r[3] for r in rows] == list(range(1, 701)) and {r[4] for r in rows} == {"items"}


@contextmanager
def _ledger_with_items(path, titles: list[str]):
    from minikafka import Source

    with Source(str(path)) as src:
        src.topic("items", Item, dedup=("url",))
        src.topic("summaries", Summary, dedup=("url",))
        add(src, [(f"u{i}", title) for i, title in enumerate(titles)])
        yield src


def test_followed_and_sequential_commits_agree_row_for_row(spark, tmp_path, monkeypatch):

    got = {}
    for follow in (True, False):
        monkeypatch.setattr(stage_module, "FOLLOW_WRITE", follow)
        with _ledger_with_items(tmp_path / f"{follow}.sqlite", [" ".join("w" * (i % 5 + 1)) for i in range(2000)]) as src:
            run_stage(spark, src, Stage("spread", ["items"], ["summaries"], transform=_spread), commit_batch_rows=333)
            got[follow] = _stored(src)
    assert got[True] == got[False] and len(got[True]) == 700


def test_a_failing_write_commits_nothing_and_names_its_error(spark, ledger):  # noqa: F811
    add(ledger, [("u1", "a"), ("u2", "b")])

    def explode(df):
        boom = F.udf(lambda s: 1 // 0 if s == "u2" else 1, "long")
        return df.select("_id", "url", boom("url").alias("words"))

    with pytest.raises(StageFailed, match="PythonException: .*ZeroDivisionError: integer division or modulo by zero"):
        run_stage(spark, ledger, Stage("boom", ["items"], ["summaries"], transform=explode))
    assert ledger.topic("summaries", Summary, dedup=("url",)).count() == 0
    assert ledger.topic("items", Item, dedup=("url",)).count("new", consumer="boom") == 2


# -- the follower alone, on part files a test thread writes in a chosen order -------------------

class _Context:
    def __init__(self):
        self.cancelled: list[str] = []

    def setJobGroup(self, group, description, interruptOnCancel=False):  # noqa: N802 - Spark's name
        pass

    def cancelJobGroup(self, group):  # noqa: N802
        self.cancelled.append(group)


class _Session:
    """What the follower and Spark's InheritableThread use of a session: its tags."""

    def __init__(self):
        self.sparkContext = _Context()
        self.tags: set[str] = set()

    def getTags(self):  # noqa: N802 - Spark's names
        return set(self.tags)

    def addTag(self, tag):  # noqa: N802
        self.tags.add(tag)

    def removeTag(self, tag):  # noqa: N802
        self.tags.discard(tag)

    def clearTags(self):  # noqa: N802
        self.tags.clear()

    def interruptTag(self, tag):  # noqa: N802
        self.sparkContext.cancelled.append(tag)


def _part(directory, k: int, values: list[int]) -> None:
    table = pa.table({"v": pa.array(values, pa.int64())})
    tmp = directory / f".tmp-{k}"
    pq.write_table(table, tmp)
    tmp.rename(directory / f"part-{k:05d}-abc-c000.snappy.parquet")  # complete files appear by rename


def _writer(order: list[int], parts: dict[int, list[int]], gate: threading.Event | None = None, extra: int = 0):
    def write(uri: str) -> int:
        directory = __import__("pathlib").Path(uri.removeprefix("file://"))
        directory.mkdir(parents=True)
        for k in order:
            if gate is not None and k == order[-1]:
                assert gate.wait(10)  # the last part waits until the reader has taken the first ones
            _part(directory, k, parts[k])
            time.sleep(0.05)
        (directory / "_SUCCESS").write_bytes(b"")
        return sum(len(v) for v in parts.values()) + extra
    return write


def _read(follower) -> list[int]:
    return [v for batch in follower for v in batch.column("v").to_pylist()]


def test_parts_come_in_partition_order_whatever_order_the_tasks_finish_in(tmp_path):
    parts = {0: [1, 2], 1: [3], 2: [4, 5, 6], 3: [7]}
    follower = FollowedWrite(_Session(), _writer([2, 0, 3, 1], parts), f"file://{tmp_path}/out", batch_rows=2)
    assert _read(follower) == [1, 2, 3, 4, 5, 6, 7] and follower.written == 7


def test_rows_are_read_while_the_write_runs(tmp_path):
    gate = threading.Event()
    parts = {0: [1], 1: [2], 2: [3]}
    follower = FollowedWrite(_Session(), _writer([0, 1, 2], parts, gate), f"file://{tmp_path}/out", batch_rows=10)
    seen = []
    for batch in follower:
        seen += batch.column("v").to_pylist()
        if seen == [1, 2]:
            assert follower.written is None  # the job is still running: part 2 waits for us
            gate.set()
    assert seen == [1, 2, 3]


def test_a_partition_without_a_file_is_passed_once_the_write_has_ended(tmp_path):
    parts = {0: [1], 2: [3], 3: [4]}  # partition 1 was empty: Spark writes no file for it
    follower = FollowedWrite(_Session(), _writer([0, 3, 2], parts), f"file://{tmp_path}/out", batch_rows=10)
    assert _read(follower) == [1, 3, 4]


def test_a_write_that_fails_raises_its_own_error_from_the_read(tmp_path):
    def write(uri: str) -> int:
        raise RuntimeError("executor lost")

    follower = FollowedWrite(_Session(), write, f"file://{tmp_path}/out", batch_rows=10)
    with pytest.raises(RuntimeError, match="executor lost"):
        _read(follower)


def test_fewer_rows_read_than_the_job_counted_is_a_staging_error(tmp_path):
    follower = FollowedWrite(_Session(), _writer([0], {0: [1, 2]}, extra=1), f"file://{tmp_path}/out", batch_rows=10)
    with pytest.raises(StagingError, match="Spark reported writing 3 row"):
        _read(follower)


def test_closing_a_follower_whose_write_still_runs_cancels_its_job(tmp_path):
    release = threading.Event()

    def write(uri: str) -> int:
        release.wait(10)
        return 0

    session = _Session()
    follower = FollowedWrite(session, write, f"file://{tmp_path}/out", batch_rows=10)
    closer = threading.Thread(target=follower.close)
    closer.start()
    time.sleep(0.1)
    release.set()  # what cancelling the job group does to a real job: it ends
    closer.join(10)
    assert session.sparkContext.cancelled == [follower.group]


def test_waiting_too_long_for_a_part_inside_the_transaction_abandons_the_follow(tmp_path):
    release = threading.Event()

    def write(uri: str) -> int:
        directory = __import__("pathlib").Path(uri.removeprefix("file://"))
        directory.mkdir(parents=True)
        _part(directory, 0, [1])
        release.wait(10)  # part 1 comes late
        _part(directory, 1, [2])
        (directory / "_SUCCESS").write_bytes(b"")
        return 2

    follower = FollowedWrite(_Session(), write, f"file://{tmp_path}/out", batch_rows=10, max_wait=0.1)
    follower.wait_first()  # part 0 is there: the commit may take the lock
    seen = []
    with pytest.raises(FollowedWrite.Abandoned, match="part 1 not written"):
        for batch in follower:
            seen += batch.column("v").to_pylist()
    assert seen == [1] and follower.waited >= 0.1
    release.set()
    assert follower.result() == 2  # the write goes on: the stage commits after it
    follower.close()


def test_the_commit_waits_for_the_first_part_before_it_takes_the_lock(tmp_path):
    release = threading.Event()
    parts = {0: [1], 1: [2]}
    follower = FollowedWrite(_Session(), _writer([0, 1], parts, release), f"file://{tmp_path}/out", batch_rows=10)
    t0 = time.perf_counter()
    follower.wait_first()
    assert (tmp_path / "out").exists() and any(p.name.startswith("part-00000") for p in (tmp_path / "out").iterdir())
    assert follower.written is None and time.perf_counter() - t0 < 10
    release.set()
    assert _read(follower) == [1, 2]


def _slow_last(df):  # the last partition's task ends a second after the others
    def words(row_id, title):
        if row_id == 2000:
            time.sleep(1.0)
        return len(title.split(" "))

    slow = F.udf(words, "long")
    return df.repartitionByRange(4, "_id").select(
        "_id", (F.col("n") % 700).cast("string").alias("url"), slow("_id", "title").alias("words"))


def test_a_stage_whose_write_outlasts_the_wait_commits_after_it_with_the_same_rows(spark, tmp_path, monkeypatch):
    from minikafka.spark.stages import follow

    monkeypatch.setattr(follow, "MAX_WAIT_SECONDS", 0.0)  # any wait inside the transaction abandons
    monkeypatch.setattr(FollowedWrite.__init__, "__defaults__", (None, 0.0))
    got = {}
    for follow_write in (True, False):
        monkeypatch.setattr(stage_module, "FOLLOW_WRITE", follow_write)
        with _ledger_with_items(tmp_path / f"{follow_write}.sqlite", ["a b"] * 2000) as src:
            result = run_stage(spark, src, Stage("spread", ["items"], ["summaries"], transform=_slow_last))
            assert (result.status, result.rows_out, result.rows_duplicate) == ("succeeded", 700, 1300)
            assert result.details.get("commit_overlaps_spark") is (False if follow_write else None)
            got[follow_write] = _stored(src)
            runs = src.runs(stage="spread")
            assert len(runs) == 1 and runs[0]["rows_out"] == 700
    assert got[True] == got[False]


def test_a_clean_up_failure_after_the_commit_leaves_the_run_committed_and_succeeded(spark, tmp_path, monkeypatch):
    def broken_clean_up(session):
        raise RuntimeError("the JVM went away after COMMIT")

    monkeypatch.setattr(stage_module, "_unpersist_all", broken_clean_up)
    monkeypatch.setattr(stage_module, "FOLLOW_WRITE", True)
    with _ledger_with_items(tmp_path / "l.sqlite", ["a b"] * 50) as src:
        result = run_stage(spark, src, Stage("spread", ["items"], ["summaries"], transform=_spread))
        assert (result.status, result.rows_out) == ("succeeded", 50)
        assert result.details["commit_overlaps_spark"] is True
        (run,) = src.runs(stage="spread")
        assert (run["status"], run["rows_out"]) == ("succeeded", 50)
        assert len(_stored(src)) == 50

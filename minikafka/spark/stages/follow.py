"""A stage's staged output read while Spark still writes it, so the commit overlaps the job.

The write job runs in a driver thread with Hadoop's "version 2" file committer: each task
renames its finished Parquet file into the output directory when the task commits, not
when the whole job does. ``FollowedWrite`` yields the rows of part 0, 1, 2... in
partition order (the order the sequential read gives), each as soon as its file is there;
a partition that wrote no file (it was empty) is passed only once the job has ended, when
every file is known. After the last row it checks that the rows read equal the rows the
job counted, so a short read raises inside the commit's transaction and nothing is
committed. If the job fails, its error is raised from the iteration (the same place).

What a reader may rely on: a file is visible only once complete (a rename), one file per
task (``maxRecordsPerFile`` is forced to 0 for the write), and a task's file is committed
once (Spark's output commit coordinator).

The commit holds the ledger's write lock while it follows, and every other writer waits
for it (up to its busy timeout). So the commit starts only once part 0 exists
(``wait_first``, no lock held), and if, inside the transaction, it has waited for parts
more than ``max_wait`` seconds in all, the reader raises ``FollowedWrite.Abandoned``: the stage
rolls back what it inserted and commits after the write instead, so a long Spark job never
holds the lock for long.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future

from ..staging import check_count, filesystem, open_staged
from .rowfn import ERROR

PART_NAME = re.compile(r"^part-(\d{5,})-.*\.parquet$")
POLL_SECONDS = 0.02
MAX_WAIT_SECONDS = 5.0  # waiting for parts inside the commit's transaction, in all (other writers wait as long)
V2_COMMITTER = {"mapreduce.fileoutputcommitter.algorithm.version": "2", "maxRecordsPerFile": "0"}


class _Abandoned(Exception):
    """The write outlasted what the commit may wait for inside its transaction. Internal
    control flow (``FollowedWrite.Abandoned``): the stage catches it and commits after the
    write, so it never reaches a user."""


class FollowedWrite:
    """Start ``write(uri)`` (returns the rows it wrote) in a thread under a Spark operation tag;
    iterate the staged rows as Arrow batches while it runs.

    Args:
        spark: the session (to cancel the job if the reader gives up).
        write: the write job, called with ``uri`` in the thread; returns its row count.
        uri: the staged output's location (a local or shared file system).
        batch_rows: rows per batch handed to the commit.
        on_written: called in the reading thread once the job has ended (a fault point).
        max_wait: seconds the reader may wait for parts while the job runs, in all, before
            it raises ``Abandoned``.
    """

    Abandoned = _Abandoned

    def __init__(self, spark, write: Callable[[str], int], uri: str, batch_rows: int,
                 on_written: Callable[[], None] | None = None, max_wait: float = MAX_WAIT_SECONDS):
        self.spark, self.uri, self.batch_rows, self.on_written = spark, uri, batch_rows, on_written
        self.max_wait = max_wait
        self.group = f"minikafka-follow-{id(self)}"
        self.started = time.perf_counter()
        self.ended: float | None = None
        self.written: int | None = None
        self.waited = 0.0  # seconds the reader waited for parts while the job ran
        self._future: Future = Future()
        self._thread = _thread(self._run, write, spark)
        self._thread.start()

    def _run(self, write: Callable[[str], int]) -> None:
        try:
            self.spark.addTag(self.group)  # classic and Connect: close() interrupts what carries it
            rows = write(self.uri)
        except BaseException as exc:  # noqa: BLE001 - handed to the reader
            self.ended = time.perf_counter()
            self._future.set_exception(exc)
        else:
            self.ended = time.perf_counter()
            self._future.set_result(rows)

    @property
    def spark_seconds(self) -> float:
        return (self.ended or time.perf_counter()) - self.started

    def result(self) -> int:
        """The rows the job wrote (waits for it; raises its error)."""
        return self._future.result()

    def _parts(self, fs, path: str) -> dict[int, str]:
        import pyarrow.fs as pafs

        try:
            infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        except FileNotFoundError:
            return {}
        found = {}
        for info in infos:
            m = PART_NAME.match(info.base_name)
            if m and info.type == pafs.FileType.File:
                found[int(m.group(1))] = info.path
        return found

    def wait_first(self) -> None:
        """Return once part 0 exists or the job has ended (before the commit takes the lock)."""
        fs, path = filesystem(self.uri)
        while not self._future.done() and 0 not in self._parts(fs, path):
            self._future_wait()

    def __iter__(self) -> Iterator:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        fs, path = filesystem(self.uri)
        k, read = 0, 0  # parts 0..k-1 are read

        def rows_of(file_path: str):
            nonlocal read
            with fs.open_input_file(file_path) as fh:
                for batch in pq.ParquetFile(fh).iter_batches(batch_size=self.batch_rows):
                    read += batch.num_rows
                    if ERROR in batch.schema.names:
                        batch = batch.filter(pc.is_null(batch.column(ERROR)))
                    if batch.num_rows:
                        yield batch

        while not self._future.done():  # parts in order while the job runs
            parts = self._parts(fs, path)
            if k in parts:
                yield from rows_of(parts[k])
                k += 1
                continue
            if self.waited >= self.max_wait:
                raise _Abandoned(f"part {k} not written after {self.waited:.1f} s of waiting")
            t = time.perf_counter()
            self._future_wait()
            self.waited += time.perf_counter() - t
        written = self.result()  # the job's own error is raised here
        self.written = written
        if self.on_written is not None:
            self.on_written()
        open_staged(self.uri, written)  # its _SUCCESS marker and every file's rows
        for n, file_path in sorted(self._parts(fs, path).items()):
            if n >= k:
                yield from rows_of(file_path)
        check_count(self.uri, written, read)

    def _future_wait(self) -> None:
        try:
            self._future.exception(timeout=POLL_SECONDS)
        except TimeoutError:
            pass

    def close(self) -> None:
        """Cancel the job if it still runs (the reader gave up: the commit failed) and wait for it.

        Cancelling reaches only jobs already submitted, so it is repeated until the thread
        has ended (the write may be about to submit its job, or the next one).
        """
        while self._thread.is_alive():
            if not self._future.done():
                self.spark.interruptTag(self.group)
            self._thread.join(0.5)


def _thread(target, write, spark) -> threading.Thread:
    """The write's thread: Spark's ``InheritableThread`` (the caller's tags, and on a classic
    session its job description and scheduler pool, go with it) when PySpark is there, else a
    plain one (tests)."""
    try:
        from pyspark import InheritableThread
    except ImportError:  # pragma: no cover - the stage needs PySpark anyway
        return threading.Thread(target=target, args=(write,), name="minikafka-stage-write", daemon=True)
    thread = InheritableThread(target, args=(write,), name="minikafka-stage-write", session=spark)
    thread.daemon = True
    return thread

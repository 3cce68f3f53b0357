"""Part files: Spark tasks write their rows as Arrow IPC files the driver reads while the
job still runs, in task order, so the SQLite commit overlaps Spark's work (backfill).

Each task writes exactly one file, ``part-NNNNN.arrow`` (NNNNN: its task), even when it
has no rows, and renames it into place only when complete: a part that exists is whole,
and a retried task rewrites the same file. The driver reads part 0, 1, 2... as each
appears (``PartStream``): the order of the rows never depends on which task finished
first. The files go wherever a pyarrow filesystem writes: the run's staging location,
which every executor sees.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa

from ..errors import StagingError

POLL_SECONDS = 0.02


def part_path(directory: str, k: int) -> str:
    return f"{directory}/part-{k:05d}.arrow"


def write_part(uri: str, k: int, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> int:
    """Write part ``k`` under ``uri`` (complete, or not at all); return its rows."""
    from .staging import filesystem

    fs, directory = filesystem(uri)
    final = part_path(directory, k)
    partial = f"{directory}/.part-{k:05d}.arrow.tmp"
    rows = 0
    with fs.open_output_stream(partial) as sink, pa.ipc.new_file(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
    fs.move(partial, final)
    return rows


def read_part(fs, directory: str, k: int, reported: int | None) -> pa.Table:
    """Part ``k``, checked against the rows its task reported (None: not known yet).

    Raises:
        StagingError: the file is missing although its task finished (the executors write
            where the driver cannot see), or holds other than the reported rows; nothing of
            it is committed.
    """
    path = part_path(directory, k)
    try:
        with fs.open_input_file(path) as fh:
            table = pa.ipc.open_file(fh).read_all()
    except FileNotFoundError:
        raise StagingError(f"staged part {path} is missing although its Spark task finished (do the executors "
                           "see the staging location?); nothing of it was committed") from None
    if reported is not None and table.num_rows != reported:
        raise StagingError(f"staged part {path}: its task reported {reported} row(s), the file holds "
                           f"{table.num_rows}; nothing of it was committed")
    return table


class PartStream:
    """Runs ``job`` (a Spark action returning ``{part: rows}``) in a background thread and
    yields the Arrow batches of parts 0..n-1 in order, each as soon as it is written.

    Raises (while iterated): the job's own error; ``StagingError`` when a part is missing
    after the job finished (the executors write where the driver cannot see) or holds
    other than the rows its task reported. ``close()`` cancels a job still running (the
    driver stopped reading: an error, Ctrl-C). ``on_wait`` is called once each time the
    reader would wait for a part (work to do in that idle time). ``rows`` is the total
    read, ``spark_seconds`` the job's wall time.
    """

    def __init__(self, spark, job: Callable[[], dict[int, int]], uri: str, parts: int, description: str,
                 on_wait: Callable[[], None] | None = None):
        from .staging import filesystem

        self.spark, self.uri, self.parts = spark, uri, parts
        self.fs, self.dir = filesystem(uri)
        self.fs.create_dir(self.dir, recursive=True)
        self.group = f"minikafka-parts-{id(self)}"
        self.error: BaseException | None = None
        self.counts: dict[int, int] | None = None
        self.rows = 0
        self.spark_seconds = 0.0
        self._job, self._description = job, description
        self._on_wait = on_wait  # called when the reader is about to wait for a part (idle time)
        self._thread = threading.Thread(target=self._run, name="minikafka-parts-job", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            self.spark.sparkContext.setJobGroup(self.group, self._description, interruptOnCancel=True)
            self.counts = self._job()
        except BaseException as exc:  # noqa: BLE001 - raised in the reading thread
            self.error = exc
        finally:
            self.spark_seconds = time.perf_counter() - t0

    def _wait_for(self, path: str) -> None:
        import pyarrow.fs as pafs

        waited = False
        while self.fs.get_file_info(path).type == pafs.FileType.NotFound:
            if not waited and self._on_wait is not None and self._thread.is_alive():
                waited = True
                self._on_wait()
                continue
            if not self._thread.is_alive():
                if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
                    return
                if self.error is not None:
                    raise self.error
                raise StagingError(f"staged part {path} is missing although its Spark job finished (do the "
                                   "executors see the staging location?); nothing of it was committed")
            self._thread.join(POLL_SECONDS)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for k in range(self.parts):
            self._wait_for(part_path(self.dir, k))
            table = read_part(self.fs, self.dir, k, None if self.counts is None else self.counts.get(k))
            self.rows += table.num_rows
            yield from table.to_batches()
        self._thread.join()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        if self._thread.is_alive():
            self.spark.sparkContext.cancelJobGroup(self.group)
            self._thread.join(60)

"""Part files: Spark tasks write their rows as Arrow IPC files the driver reads while the
job still runs, in task order, so the SQLite commit overlaps Spark's work (backfill).

Each task writes exactly one file, ``part-NNNNN.arrow`` (NNNNN: its task), even when it
has no rows, and renames it into place only when complete: a part that exists is whole,
and a retried task rewrites the same file. The driver reads part 0, 1, 2... in order as
their tasks end (``jsonlparts.ChunkJobs``): the order of the rows never depends on which
task finished first. The files go wherever a pyarrow filesystem writes: the run's staging location,
which every executor sees.
"""

from __future__ import annotations

from collections.abc import Iterable

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

"""Part files: Spark tasks write their rows as row files (``ledger.topics.rowfiles``: one SQLite
file each) the driver commits while the job still runs, in task order, so the SQLite
commit overlaps Spark's work (backfill).

Each task writes exactly one file, ``part-NNNNN.sqlite`` (NNNNN: its task), even when it
has no rows, and renames it into place only when complete: a part that exists is whole,
and a retried task rewrites the same file. The driver reads part 0, 1, 2... in order as
their tasks end (``jsonlparts.ChunkJobs``): the order of the rows never depends on which
task finished first. The files go wherever a pyarrow filesystem writes: the run's staging
location, which every executor sees. SQLite opens only local files, so on any other
filesystem a part is written to a local temporary file and uploaded, and the driver
downloads it before it attaches it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ...errors import StagingError

COPY_BYTES = 8 << 20  # a part's upload and download, block by block


def part_path(directory: str, k: int) -> str:
    return f"{directory}/part-{k:05d}.sqlite"


def _is_local(fs) -> bool:
    import pyarrow.fs as pafs

    return isinstance(fs, pafs.LocalFileSystem)


def write_part(uri: str, k: int, write: Callable[[str], None]) -> None:
    """Write part ``k`` under ``uri`` (complete, or not at all): ``write(path)`` creates the
    file at a local ``path`` that does not exist yet."""
    from ..staging import filesystem

    fs, directory = filesystem(uri)
    final = part_path(directory, k)
    # one temporary name per attempt: a retried or speculative attempt never touches another's file
    partial = f"{directory}/.part-{k:05d}.{uuid.uuid4().hex}.sqlite.tmp"
    try:
        if _is_local(fs):
            write(partial)
        else:
            with tempfile.TemporaryDirectory(prefix="minikafka-part-") as tmp:
                local = os.path.join(tmp, "part.sqlite")
                write(local)
                with open(local, "rb") as src, fs.open_output_stream(partial) as sink:
                    shutil.copyfileobj(src, sink, COPY_BYTES)
        fs.move(partial, final)
    except BaseException:
        try:
            fs.delete_file(partial)
        except (OSError, FileNotFoundError):
            pass  # never written, or already gone: the run's staging directory is removed anyway
        raise


@contextmanager
def local_part(fs, directory: str, k: int) -> Iterator[str]:
    """A local path of part ``k`` for the block (downloaded first when the staging
    location is not local).

    Raises:
        StagingError: the file is missing although its task finished (the executors write
            where the driver cannot see); nothing of it is committed.
    """
    path = part_path(directory, k)
    missing = StagingError(f"staged part {path} is missing although its Spark task finished (do the executors "
                           "see the staging location?); nothing of it was committed")
    if _is_local(fs):
        if not os.path.isfile(path):
            raise missing
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="minikafka-part-") as tmp:
        local = os.path.join(tmp, "part.sqlite")
        try:
            with fs.open_input_stream(path) as src, open(local, "wb") as sink:
                shutil.copyfileobj(src, sink, COPY_BYTES)
        except FileNotFoundError:
            raise missing from None
        yield local


def check_count(path: str, found: int, reported: int) -> None:
    """Raises StagingError when part ``path`` holds other than the rows its task reported."""
    if found != reported:
        raise StagingError(f"staged part {path}: its task reported {reported} row(s), the file holds "
                           f"{found}; nothing of it was committed")

"""Write a file all at once or not at all: a temporary file beside it, fsync, rename."""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from ..errors import OutputFileError


@functools.cache
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` complete, when the block ends without error.

    The content goes to a hidden temporary file in the same directory, is flushed and
    fsynced, then renamed over ``path``. On any error the temporary file is removed and
    whatever was at ``path`` before is left as it was.

    Raises:
        OutputFileError: the directory does not exist, or writing failed with an
            ``OSError`` (disk full, permission denied...); names the file.
    """
    path = Path(path)
    directory = path.parent
    if not directory.is_dir():
        raise OutputFileError(f"{path}: no directory {directory}; create it first")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputFileError(f"{path}: cannot write in {directory}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # as a plain open() would have made it
        os.replace(tmp, path)
    except BaseException as exc:
        with suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputFileError(f"{path}: cannot write: {exc.strerror or exc}; nothing was written") from exc
        raise
    with suppress(OSError):  # make the rename itself durable (not every filesystem allows this)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

"""Write a file all at once or not at all: a temporary file beside it, fsync, rename.

What the path names decides how it is written (``atomic_write``):

- nothing yet, or a regular file: a hidden temporary file in the same directory,
  fsynced, then renamed over it (appears complete or not at all);
- a symbolic link to a regular file (or to nothing yet): the link is followed (through
  every hop) and its final target is replaced that way; the link itself stays a link;
- a named pipe (FIFO) or a character device (``/dev/null``, a terminal, what
  ``/dev/stdout`` points at): written directly, as a stream, never renamed over: these
  cannot be replaced, and a reader may be waiting on them (a caller handed its own
  standard output, e.g. ``/dev/stdout``, should write to it instead: ``same_file``);
- anything else (a directory, a socket, a block device): refused, naming what it is.
"""

from __future__ import annotations

import functools
import os
import stat
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


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def output_kind(path: str | os.PathLike) -> tuple[Path, str]:
    """(the path to write, how): ``"replace"`` (atomic rename, of a symbolic link's final
    target), or ``"stream"`` (a FIFO or a character device, opened through ``path`` itself
    so that links like ``/dev/stdout`` reach what they point at).

    Raises:
        OutputFileError: the path (or a link's target) is a directory, a socket, a block
            device or another special file.
    """
    given = Path(path)
    try:
        mode = os.stat(given).st_mode  # follows links
    except FileNotFoundError:  # nothing there yet (or a link to nothing yet: create its target)
        return (Path(os.path.realpath(given)) if given.is_symlink() else given), "replace"
    except OSError as exc:
        raise OutputFileError(f"{given}: cannot write: {exc.strerror or exc}") from exc
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return given, "stream"
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    if stat.S_ISREG(mode):
        return target, "replace"
    shown = given if target == given else f"{given} (a link to {target})"
    raise OutputFileError(f"{shown} is {_kind(mode)}; give a file name (or '-' for standard output)")


def same_file(path: str | os.PathLike, fd: int) -> bool:
    """``path`` names the file open as ``fd`` (``/dev/stdout`` and links to it, or the very
    file standard output was redirected to)."""
    try:
        a, b = os.stat(path), os.fstat(fd)
    except (OSError, ValueError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


@contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` complete, when the block ends without error.

    The content goes to a hidden temporary file in the same directory, is flushed and
    fsynced, then renamed over ``path``. On any error the temporary file is removed and
    whatever was at ``path`` before is left as it was. A symbolic link is followed: its
    target is replaced and the link stays. A named pipe or a character device is written
    directly (a stream: what was written before an error has been read already).

    Raises:
        OutputFileError: the directory does not exist, the path is a directory or another
            special file, or writing failed with an ``OSError`` (disk full, permission
            denied..., a FIFO's reader gone); names the file.
    """
    target, how = output_kind(path)
    if how == "stream":
        with _stream(Path(path)) as fh:
            yield fh
        return
    with _replace(Path(path), target) as fh:
        yield fh


@contextmanager
def _stream(given: Path) -> Iterator[IO[bytes]]:
    try:
        fh = open(os.open(given, os.O_WRONLY), "wb")  # no O_CREAT, no O_TRUNC: a pipe or a device
    except OSError as exc:
        raise OutputFileError(f"{given}: cannot write: {exc.strerror or exc}") from exc
    with fh:
        try:
            yield fh
            fh.flush()
        except OSError as exc:  # a reader that closed a pipe early, too
            raise OutputFileError(f"{given}: cannot write: {exc.strerror or exc}") from exc


@contextmanager
def _replace(given: Path, path: Path) -> Iterator[IO[bytes]]:
    directory = path.parent
    if not directory.is_dir():
        raise OutputFileError(f"{given}: no directory {directory}; create it first")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputFileError(f"{given}: cannot write in {directory}: {exc.strerror or exc}") from exc
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
            raise OutputFileError(f"{given}: cannot write: {exc.strerror or exc}; nothing was written") from exc
        raise
    with suppress(OSError):  # make the rename itself durable (not every filesystem allows this)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

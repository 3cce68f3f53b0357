"""Copying and hashing the files of a snapshot.

- ``copy_file_steadily(source, target)``: a copy written out to disk slice by slice, so
  that another process's fsync never waits behind a gigabyte of unwritten pages;
- ``HashBehind(path)``: the SHA-256 of a file computed in a thread while the file is being
  written, reading back only what the writer says is already there (SHA-256 and file reads
  release the GIL, so the hashing overlaps the copy);
- ``sha256_of(path)``: the SHA-256 of a finished file.

No SQL here: what a copy means for SQLite is ``snapshots``' business.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

HASH_CHUNK = 1 << 20  # read back through one reused buffer that stays in the CPU's cache
FLUSH_SECONDS = 0.02  # what another process's fsync may wait behind a slice of the copy
MIN_SLICE, MAX_SLICE = 1 << 20, 256 << 20
COPY_CHUNK = 16 << 20


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _hash_range(fh, digest, buf: memoryview, start: int, end: int | None) -> int:
    """Feed ``digest`` the file's bytes from ``start`` up to ``end`` (None: its end); the new position."""
    pos = start
    while end is None or pos < end:
        want = len(buf) if end is None else min(len(buf), end - pos)
        got = fh.readinto(buf[:want])
        if not got:
            break
        digest.update(buf[:got])
        pos += got
    return pos


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    buf = memoryview(bytearray(HASH_CHUNK))
    with open(path, "rb", buffering=0) as fh:
        _hash_range(fh, digest, buf, 0, None)
    return digest.hexdigest()


class HashBehind:
    """The SHA-256 of a file that is being written, hashed in a thread that follows the writer.

    The writer calls ``upto(n)`` once the file's first ``n`` bytes are final, and ``finish()``
    when it is done: that hashes the rest, to the end of the file, and returns the hex digest.
    The digest is of the bytes read back from the file, never of a buffer on the way to it.
    ``close()`` stops the thread without a digest (the copy failed).
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._marks: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._digest: str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"sha256 {path.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            digest = hashlib.sha256()
            buf = memoryview(bytearray(HASH_CHUNK))
            pos = 0
            with open(self._path, "rb", buffering=0) as fh:
                while True:
                    mark = self._marks.get()
                    if mark is None:
                        break
                    if mark < 0:  # closed without a digest
                        return
                    pos = _hash_range(fh, digest, buf, pos, mark)
                _hash_range(fh, digest, buf, pos, None)
            self._digest = digest.hexdigest()
        except BaseException as exc:  # noqa: BLE001 (handed to the writer's thread by finish())
            self._error = exc

    def upto(self, n: int) -> None:
        self._marks.put(n)

    def finish(self) -> str:
        self._marks.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._digest is not None
        return self._digest

    def close(self) -> None:
        self._marks.put(-1)
        self._thread.join()


def copy_file_steadily(source: Path, target: Path, *, flush_seconds: float = FLUSH_SECONDS,
                       on_copied: Callable[[int, int], None] | None = None,
                       on_bytes: Callable[[int, int], None] | None = None) -> int:
    """Copy ``source`` to a new ``target``, writing it out to disk slice by slice; the bytes copied.

    A copy that leaves a gigabyte of unwritten pages behind makes every other process's
    fsync wait for them (the file system's journal commits them first): an appender's
    durable commit would stall for seconds. So each slice is flushed (``fdatasync``) before
    the next is copied, and the slice is sized so that a flush takes about
    ``flush_seconds``: doubled while flushes are quicker, halved when slower (1 to 256 MB).
    The kernel copies the bytes (``copy_file_range``, 16 MB at a time), no user-space buffer.
    ``on_copied(fd, done)`` is called with the target's descriptor as soon as each 16 MB is
    in the file (before the slice's flush: a reader may follow from there), ``on_bytes(done,
    size)`` after each flush.
    """
    with open(source, "rb") as src, open(target, "wb") as dst:
        size = os.fstat(src.fileno()).st_size
        done, slice_bytes = 0, MIN_SLICE * 8
        while done < size:
            end = min(done + slice_bytes, size)
            while done < end:  # in chunks, so that a reader following the copy is never a whole slice behind
                step = min(COPY_CHUNK, end - done)
                try:
                    copied = os.copy_file_range(src.fileno(), dst.fileno(), step)
                except OSError:  # a file system without it: plain reads and writes
                    copied = dst.write(src.read(step))
                    dst.flush()
                if copied == 0:  # the file shrank while it was copied (a log restarted): what is there is copied
                    size = end = done
                    break
                done += copied
                if on_copied is not None:
                    on_copied(dst.fileno(), done)
            t0 = time.monotonic()
            os.fdatasync(dst.fileno())
            took = time.monotonic() - t0
            if took < flush_seconds / 2:
                slice_bytes = min(slice_bytes * 2, MAX_SLICE)
            elif took > flush_seconds * 2:
                slice_bytes = max(slice_bytes // 2, MIN_SLICE)
            if on_bytes is not None:
                on_bytes(done, size)
    return done

"""An exclusive lock held through an open file (``flock``): released when the holder dies."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path

from ..errors import LockBusy


@contextmanager
def exclusive_lock(path: str | Path, *, wait: float = 0.0, note: str = "", poll: float = 0.2):
    """Hold ``path`` exclusively for the block; wait up to ``wait`` seconds, then raise LockBusy.

    The holder's pid and ``note`` are written into the file so a second caller can say
    who holds it. The kernel drops the lock when the holder exits, however it exits.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
                    raise LockBusy(path, holder) from None
                time.sleep(poll)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} {note}".strip().encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock

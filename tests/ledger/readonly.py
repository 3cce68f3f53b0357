"""Making files and directories truly read-only in tests that run as root.

Root ignores mode bits (``chmod 0444`` stops nobody), so a test makes a file or a
directory immutable with ``chattr +i`` (honoured even for root on ext4, xfs, btrfs)
and skips where the file system or the container does not allow it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest


class Immutable:
    """``chattr +i`` on request; every flag set is removed again at teardown."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def __call__(self, *paths: Path) -> None:
        if shutil.which("chattr") is None:
            pytest.skip("chattr is not installed")
        for path in paths:
            done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"chattr +i is not allowed here: {done.stderr.strip()}")
            self.paths.append(Path(path))

    def release(self) -> None:
        for path in reversed(self.paths):
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)
        self.paths.clear()


def fingerprint(directory: Path) -> dict[str, tuple[int, int, str]]:
    """name -> (size, mtime_ns, sha256) of every file in ``directory``: what "wrote nothing" compares."""
    out = {}
    for path in sorted(Path(directory).iterdir()):
        if path.is_file():
            st = path.stat()
            out[path.name] = (st.st_size, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return out

"""Kill a process frozen at a fault point ($MINIKAFKA_FREEZE_AT): the crash tests' one way to do it."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def kill_when_frozen(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait (up to ``timeout`` s) for ``proc`` to print FROZEN on its stderr (text mode), then
    SIGKILL it and check that the kill is what ended it."""
    deadline = time.time() + timeout
    for line in proc.stderr:
        if line.startswith("FROZEN") or time.time() > deadline:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

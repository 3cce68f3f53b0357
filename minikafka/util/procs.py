"""Child processes that die with the process that started them.

``die_with_parent()`` asks Linux (``prctl(PR_SET_PDEATHSIG, SIGKILL)``) to kill the
calling process when its parent dies, so a killed runner leaves no stage running as an
orphan that could still write to staging or commit. ``popen_tied`` starts a child that
way, in its own process group, and kills the whole group if the caller is interrupted.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None, signum: int = signal.SIGKILL) -> bool:
    """Have this process sent ``signum`` (SIGKILL) when its parent dies (Linux only; returns False elsewhere).

    ``parent_pid``: the parent expected; if it already died before the call took
    effect (this process was re-parented), exit at once.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
            return False
    except OSError:
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(137)
    return True


def concurrency_limit() -> int:
    """The most worker processes a command starts: 4 per CPU, at least 32, at most 256."""
    return min(256, max(32, 4 * (os.cpu_count() or 1)))


def popen_tied(cmd: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` whose child is killed when this process dies, in its own process group."""
    parent = os.getpid()
    return subprocess.Popen(cmd, preexec_fn=lambda: die_with_parent(parent), start_new_session=True, **kwargs)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (the stage's JVM and its Python driver)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def run_tied(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Like ``subprocess.run(capture_output=True, text=True)`` but the child dies with us."""
    proc = popen_tied(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    try:
        out, err = proc.communicate()
    except BaseException:
        kill_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def child_env() -> dict[str, str]:
    """This process's environment with its import path, so a child (a stage's job, an engine's
    Python workers) resolves the same modules."""
    env = dict(os.environ)
    # the working directory (schemas/, jobs/) after the installed packages, as the CLI has it
    entries = [p for p in sys.path if p]
    cwd = str(Path.cwd())
    env["PYTHONPATH"] = os.pathsep.join(entries + ([] if cwd in entries else [cwd]))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/PID/stat`` field 22), so a
    pid the kernel reused for another process is told apart; None when no such process runs
    (a zombie counts as gone) or ``/proc`` is not there."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            after_name = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if not after_name or after_name[0] in (b"Z", b"X"):
        return None
    try:
        return int(after_name[19])  # field 22; the fields after the name start at field 3
    except (IndexError, ValueError):
        return None


def is_running(pid: int, started: int | None) -> bool:
    """Process ``pid`` runs and is the one that started at ``started`` (None: any process with that pid)."""
    now = process_start(pid)
    return now is not None and (started is None or now == started)

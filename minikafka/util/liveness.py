"""Is the process that wrote a 'running' run row still there? Exactly, not by a pid alone.

A run row that says 'running' names its process: pid, host and the process's start time
(``this_process``). ``process_state`` answers for such a name:

- ``alive``: on this host, a process with that pid exists and started at that time;
- ``gone``: on this host, no process has that pid, or the pid's process started at another
  time (the pid was reused after the run's process died); on another host, the run's lock
  file (``lock``) can be taken, or is held by another run, so that run is over (a run holds
  its lock to its end);
- ``unknown``: on another host without a lock that tells (a container with another
  hostname on the same kernel shares the lock file, a copied ledger does not).

"This host" is the same host name and the same pid namespace: a container that shares the
host's name (``--network host``) but numbers its processes apart counts as another host.

The start time is the kernel's (``/proc/<pid>/stat`` field 22, clock ticks since boot),
paired with the boot id (``/proc/sys/kernel/random/boot_id``): a reboot makes every old
run's process gone. Without ``/proc`` (not Linux) the start time is None and a pid that
exists counts as alive.
"""

from __future__ import annotations

import fcntl
import os
import socket
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

State = Literal["alive", "gone", "unknown"]


@lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "noboot"


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def start_time(pid: int) -> str | None:
    """``<ticks since boot>@<boot id>`` of process ``pid``, None when it does not exist or
    the system has no ``/proc``."""
    fields = _stat(pid)
    return None if fields is None else f"{fields[19]}@{_boot_id()}"  # field 22: the 20th after the name


def host_name() -> str:
    return socket.gethostname()


@lru_cache(maxsize=1)
def pid_namespace() -> str | None:
    """This process's pid namespace (``pid:[4026531836]``), None without ``/proc``: a container
    sharing the host's name (``--network host``) still numbers its processes apart."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def this_process() -> dict[str, Any]:
    """The name a run row keeps of the process writing it: ``{"pid", "host", "start", "pidns"}``."""
    pid = os.getpid()
    return {"pid": pid, "host": host_name(), "start": start_time(pid), "pidns": pid_namespace()}


def _same_machine(process: dict[str, Any]) -> bool:
    """Its pid means the same process here: same host name and (when both are known) pid namespace."""
    if process.get("host") != host_name():
        return False
    theirs, ours = process.get("pidns"), pid_namespace()
    return theirs is None or ours is None or theirs == ours


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def lock_is_free(lock: str | Path, run_id: str | None = None) -> bool | None:
    """True when nobody holds ``lock`` (a shared ``flock`` is granted at once and released) or
    its holder is not run ``run_id`` (``filelock`` writes ``pid N run ID`` into the file), False
    when the run holds it, None when there is no such file."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        return run_id is not None and f"run {run_id}" not in holder
    finally:
        os.close(fd)  # closing releases a lock that was granted
    return True


def process_state(process: dict[str, Any] | None, lock: str | Path | None = None,
                  run_id: str | None = None) -> State:
    """``alive``, ``gone`` or ``unknown`` for a process named by ``this_process`` (see the module
    doc); ``lock``: the lock file run ``run_id`` holds while it runs, if it has one."""
    if not isinstance(process, dict) or not isinstance(process.get("pid"), int):
        return "unknown"  # a row written before runs named their process
    if not _same_machine(process):
        free = lock_is_free(lock, run_id) if lock else None
        return "unknown" if free is None else "gone" if free else "alive"
    pid = process["pid"]
    if not _pid_exists(pid):
        return "gone"
    fields = _stat(pid)
    if fields is None:  # no /proc: a pid that exists is taken for the run's process
        return "alive"
    if fields[0] in ("Z", "X"):  # dead, not yet reaped by its parent
        return "gone"
    started = process.get("start")
    return "alive" if started is None or f"{fields[19]}@{_boot_id()}" == started else "gone"

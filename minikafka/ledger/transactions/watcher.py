"""Wake-ups on commits from any process: one watcher thread per Source.

The watcher owns its own read connection and compares ``PRAGMA data_version``
with the last value it saw: that counter changes whenever another connection
(in this process or any other) commits, ignores rolled-back transactions, and
survives WAL checkpoints and resets. (Stat-polling the ``-wal`` file, which
honker tried first, misses same-size commits after a checkpoint, breaks with
clock skew and wakes on rolled-back growth.)

How often it asks depends on the backend:

- ``inotify`` (Linux, the default there): the thread sleeps in ``select`` on an
  inotify descriptor watching the ledger's directory. A write to the ledger's
  files (a writer appending WAL frames) starts a *hot window* of
  ``HOT_WINDOW`` seconds in which it polls every ``POLL_INTERVAL`` (1 ms): the
  frames reach the WAL before the commit becomes visible (fsync, then the
  wal-index update, which no file event reports), so one check per event is
  not enough. Outside hot windows it checks every ``IDLE_CHECK`` seconds as a
  safety net. An idle waiter costs almost no CPU.
- ``poll`` (elsewhere, or ``MINIKAFKA_WATCHER=poll``): while at least one
  thread waits it polls every ``POLL_INTERVAL`` for ``HOT_WINDOW`` after a
  waiter arrives or a commit is seen, then every ``POLL_BACKOFF`` (10 ms); it
  sleeps while nobody waits. In CPython a 1 ms poll loop costs about 5% of a
  core on a small VM, which is why neither backend polls that fast for long.

Interface for waiters (used by ``topic.wait``, queues, listeners, groups,
streams)::

    mark = watcher.mark()          # 1. BEFORE reading state
    if not ready():                # 2. read indexed state
        mark = watcher.wait(mark, timeout)   # 3. returns when a commit may have landed

``wait`` returns the new change count (equal to ``mark`` on timeout). A spare
wake is harmless (the caller re-reads); a missed one cannot happen as long as
``mark()`` was taken before the read. ``wait_until`` wraps the loop. A timeout is
None (no limit) or a finite number of seconds; NaN or infinity is an error (a NaN
deadline never passes, and the wait would spin).

When the ledger file is replaced under a running watcher (another file renamed over
its path, or the path deleted and created again), every connection already open
keeps reading the old file and no commit would ever wake a waiter again. The thread
compares the path's device and inode with the ones it started with about every
``IDENTITY_CHECK`` seconds (at once on a file event), and then every ``wait`` and
``mark`` raises ``LedgerReplacedError`` naming the file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import select
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ...errors import InvalidDurationError, InvalidSettingError, LedgerReplacedError
from .connection import file_uri

log = logging.getLogger("minikafka")

POLL_INTERVAL = 0.001
POLL_BACKOFF = 0.01
HOT_WINDOW = 0.25
IDLE_CHECK = 0.25
IDENTITY_CHECK = 0.5
BACKENDS = ("inotify", "poll")

T = TypeVar("T")

# inotify(7) constants
_IN_MODIFY = 0x00000002
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200


def _open_inotify(directory: str) -> int | None:
    """An inotify descriptor watching ``directory`` for writes, or None if unavailable."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None
        mask = _IN_MODIFY | _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
        if libc.inotify_add_watch(fd, os.fsencode(directory), mask) < 0:
            os.close(fd)
            return None
        return fd
    except (OSError, AttributeError):
        return None


def default_backend() -> str:
    """``MINIKAFKA_WATCHER`` (``poll`` or ``inotify``), else inotify on Linux, poll elsewhere.

    Raises:
        InvalidSettingError: ``MINIKAFKA_WATCHER`` holds anything else (empty means unset).
    """
    raw = os.environ.get("MINIKAFKA_WATCHER", "")
    chosen = raw.strip().lower()
    if chosen in BACKENDS:
        return chosen
    if chosen:
        raise InvalidSettingError(
            f"MINIKAFKA_WATCHER={raw!r} is not a watcher backend: use 'inotify' or 'poll' (or leave it unset)")
    return "inotify" if sys.platform.startswith("linux") else "poll"


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, or None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def check_timeout(timeout: float | None) -> float | None:
    """``timeout`` if it is None or a finite number (negative counts as 0).

    Raises:
        InvalidDurationError: NaN, infinity, or not a number.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != timeout \
            or timeout in (float("inf"), float("-inf")):
        raise InvalidDurationError(
            f"timeout must be None or a finite number of seconds >= 0, got {timeout!r}")
    return max(0.0, float(timeout))


class Watcher:
    """Notices commits to one SQLite file by any connection and wakes every waiter.

    Args:
        path: the ledger file (":memory:" gives a watcher that never fires: no
            other connection can write an in-memory database).
        backend: "inotify", "poll" or None for ``default_backend()``.

    The thread starts on the first ``mark()`` and stops on ``close()``.

    Raises:
        InvalidSettingError: an unknown backend (or ``MINIKAFKA_WATCHER`` value).
    """

    def __init__(self, path: str, *, backend: str | None = None):
        self.path = str(path)
        if backend is not None and backend not in BACKENDS:
            raise InvalidSettingError(f"watcher backend must be 'inotify' or 'poll', got {backend!r}")
        self.backend = backend or default_backend()
        # the file this Source opened: a different one at the path later means it was replaced
        self._identity = None if self.path == ":memory:" else _identity(self.path)
        self.error: LedgerReplacedError | None = None
        self._cond = threading.Condition()
        self._changes = 0
        self._waiting = 0
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._closed = False
        self._wake_r, self._wake_w = (None, None)
        self._async_waiters: list[tuple[Any, Any]] = []  # (event loop, asyncio.Event) of wait_async calls
        self.polls = 0  # data_version reads so far (for tests and benchmarks)

    # -- the waiter's side ------------------------------------------------------
    def mark(self) -> int:
        """Start the thread if needed and return the change count. Call BEFORE reading state.

        Raises:
            LedgerReplacedError: the ledger file was replaced since the Source opened it.
        """
        if self._thread is None and self.path != ":memory:":
            self._start()
        with self._cond:
            if self.error is not None:
                raise self.error
            return self._changes

    def wait(self, mark: int, timeout: float | None = None) -> int:
        """Block until a commit newer than ``mark`` was seen, or ``timeout`` seconds passed.

        Returns:
            The current change count (``mark`` itself when it timed out).

        Raises:
            LedgerReplacedError: the ledger file was replaced (before or during the wait).
            InvalidDurationError: a NaN or infinite timeout.
        """
        timeout = check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if self.error is not None:
                raise self.error
            if self._changes != mark or self._closed:
                return self._changes
            self._waiting += 1
            if self._waiting == 1:
                self._poke()
            try:
                while self._changes == mark and not self._closed and self.error is None:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        break
                    self._cond.wait(remaining)
            finally:
                self._waiting -= 1
            if self.error is not None:
                raise self.error
            return self._changes

    async def wait_async(self, mark: int, timeout: float | None = None) -> int:
        """``wait`` for asyncio: the event loop keeps running; the watcher thread wakes this
        waiter through ``loop.call_soon_threadsafe`` (the same commit detection as ``wait``).

        Returns:
            The current change count (``mark`` itself when it timed out).

        Raises:
            InvalidDurationError: a NaN or infinite timeout (as ``wait``).
        """
        import asyncio

        timeout = check_timeout(timeout)
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        entry = (loop, event)
        with self._cond:
            if self._changes != mark or self._closed:
                return self._changes
            self._async_waiters.append(entry)
            self._waiting += 1
            if self._waiting == 1:
                self._poke()
        try:
            if timeout is None:
                await event.wait()
            else:
                try:
                    await asyncio.wait_for(event.wait(), max(0.0, timeout))
                except TimeoutError:
                    pass
        finally:
            with self._cond:
                self._waiting -= 1
                self._async_waiters.remove(entry)
        with self._cond:
            return self._changes

    def _wake_async_in_lock(self) -> None:
        for loop, event in self._async_waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop is closed: its waiter is gone
                pass

    def close(self) -> None:
        """Stop the thread and release every waiter. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            self._wake_async_in_lock()
        self._poke()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        fds, (self._wake_r, self._wake_w) = (self._wake_r, self._wake_w), (None, None)
        for fd in fds:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass

    # -- the thread's side ------------------------------------------------------
    def _start(self) -> None:
        with self._cond:
            if self._thread is not None or self._closed:
                return
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            os.set_blocking(self._wake_w, False)
            self._thread = threading.Thread(target=self._run, name=f"minikafka-watcher {self.path}", daemon=True)
            self._thread.start()
        self._started.wait(5.0)

    def _poke(self) -> None:
        fd = self._wake_w
        if fd is not None:
            try:
                os.write(fd, b"x")
            except OSError:
                pass  # pipe full: the thread is awake anyway

    def _fire(self) -> None:
        with self._cond:
            self._changes += 1
            self._cond.notify_all()
            if self._async_waiters:
                self._wake_async_in_lock()

    def _replaced(self) -> bool:
        """Whether the path no longer names the file this watcher started on; if so, every
        waiter is released with ``LedgerReplacedError``."""
        now = _identity(self.path)
        if self._identity is None or now == self._identity:
            return False
        how = "removed" if now is None else "replaced by another file (renamed over it, or deleted and created again)"
        with self._cond:
            self.error = LedgerReplacedError(
                f"the ledger file {self.path} was {how} while this Source had it open: its connections still "
                f"read the old file and would never see a commit again; open a new Source on {self.path}")
            self._cond.notify_all()
        return True

    def _connect(self) -> sqlite3.Connection | None:
        try:
            # read-only: the watcher only reads PRAGMA data_version, and never creates a file
            return sqlite3.connect(file_uri(self.path, mode="ro"), uri=True, isolation_level=None,
                                   check_same_thread=False, timeout=0.1)
        except sqlite3.Error as exc:
            log.debug("watcher cannot open %s: %s", self.path, exc)
            return None

    def _run(self) -> None:
        conn = self._connect()
        last = self._version(conn)
        inotify = None
        if self.backend == "inotify":
            inotify = _open_inotify(str(Path(self.path).resolve().parent))
            if inotify is None:
                log.debug("inotify unavailable for %s; polling", self.path)
        wake_r = self._wake_r
        self._started.set()
        hot_until = 0.0
        next_identity_check = 0.0
        try:
            while not self._closed:
                now = time.monotonic()
                if inotify is not None:
                    timeout = POLL_INTERVAL if (now < hot_until and self._waiting) else IDLE_CHECK
                elif self._waiting:
                    timeout = POLL_INTERVAL if now < hot_until else POLL_BACKOFF
                else:
                    timeout = None  # nobody waits: sleep until a waiter pokes us
                fds = [wake_r] + ([inotify] if inotify is not None else [])
                try:
                    ready, _, _ = select.select(fds, [], [], timeout)
                except (OSError, ValueError):
                    return  # closed under us
                if self._closed:
                    return
                file_event = False
                for fd in ready:
                    _drain(fd)
                    if fd == inotify or inotify is None:  # a file event, or (polling) a new waiter
                        hot_until = time.monotonic() + HOT_WINDOW
                        file_event = file_event or fd == inotify
                if file_event or time.monotonic() >= next_identity_check:
                    next_identity_check = time.monotonic() + IDENTITY_CHECK
                    if self._replaced():
                        return
                if conn is None:
                    conn = self._connect()
                    last = None
                version = self._version(conn)
                if version is None:
                    if conn is not None:
                        conn.close()
                    conn = None
                    self._fire()  # a failed check wakes everyone: spare wakes are harmless
                    time.sleep(POLL_INTERVAL)
                    continue
                if version != last:
                    if last is not None:
                        self._fire()
                        hot_until = time.monotonic() + HOT_WINDOW  # commits come in bursts
                    last = version
        finally:
            if conn is not None:
                conn.close()
            if inotify is not None:
                os.close(inotify)

    def _version(self, conn: sqlite3.Connection | None) -> int | None:
        if conn is None:
            return None
        try:
            self.polls += 1
            return conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            return None


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except (BlockingIOError, OSError):
        pass


@dataclass(frozen=True)
class Pause:
    """What a waiting loop asks its driver for between two reads of state.

    ``mark`` is the watcher's change count taken before the read: the driver returns once
    a newer commit was seen, or after ``seconds`` (None: no limit). With ``mark`` None there
    is no watcher to ask (an in-memory Source, an injected sleep): the driver sleeps
    ``seconds``.
    """

    mark: int | None
    seconds: float | None


def pause(watcher: Watcher | None, step: Pause, sleep: Callable[[float], None] = time.sleep) -> None:
    """The blocking driver's side of one ``Pause``."""
    if step.mark is None or watcher is None:
        sleep(step.seconds or 0.0)
    else:
        watcher.wait(step.mark, step.seconds)


async def pause_async(watcher: Watcher | None, step: Pause) -> None:
    """The asyncio driver's side of one ``Pause``: the event loop keeps running."""
    import asyncio

    if step.mark is None or watcher is None:
        await asyncio.sleep(step.seconds or 0.0)
    else:
        await watcher.wait_async(step.mark, step.seconds)


def until(watcher: Watcher, ready: Callable[[], T], timeout: float | None = None, *,
          next_deadline: Callable[[], float | None] | None = None) -> Generator[Pause, None, T | None]:
    """The loop of ``wait_until`` as steps: reads state, yields a ``Pause`` while not ready.

    One loop for the blocking and the asyncio waits (``drive`` and ``drive_async`` step it),
    so the two forms cannot drift. The generator's return value is the first truthy value
    of ``ready()``, or None once ``timeout`` passed.

    Raises:
        InvalidDurationError: (at the first step) a NaN or infinite timeout.
    """
    timeout = check_timeout(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        mark = watcher.mark()
        value = ready()
        if value:
            return value
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return None
        if next_deadline is not None:
            due = next_deadline()
            if due is not None:
                remaining = due if remaining is None else min(remaining, due)
        yield Pause(mark, None if remaining is None else max(0.0, remaining))


def drive(watcher: Watcher | None, steps: Generator[Pause, None, T]) -> T:
    """Run a waiting loop's steps, blocking in the watcher at each ``Pause``; returns its value."""
    try:
        while True:
            pause(watcher, next(steps))
    except StopIteration as done:
        return done.value


async def drive_async(watcher: Watcher | None, steps: Generator[Pause, None, T]) -> T:
    """Run a waiting loop's steps, awaiting the watcher at each ``Pause``; returns its value."""
    try:
        while True:
            step = next(steps)
            await pause_async(watcher, step)
    except StopIteration as done:
        return done.value


def wait_until(watcher: Watcher, ready: Callable[[], T], timeout: float | None = None, *,
               next_deadline: Callable[[], float | None] | None = None) -> T | None:
    """Call ``ready()`` until it returns something truthy; wait for a commit between calls.

    Args:
        watcher: the Source's watcher.
        ready: reads state (on the caller's connection) and returns a truthy value when done.
        timeout: seconds to wait in all; None waits forever.
        next_deadline: optional; seconds until state may change without a commit (a due
            time, a lease expiry), so the waiter re-checks then.

    Returns:
        The first truthy value of ``ready()``, or None on timeout.

    Raises:
        LedgerReplacedError: the ledger file was replaced while waiting.
        InvalidDurationError: a NaN or infinite timeout.
    """
    return drive(watcher, until(watcher, ready, timeout, next_deadline=next_deadline))


async def wait_until_async(watcher: Watcher, ready: Callable[[], T], timeout: float | None = None, *,
                           next_deadline: Callable[[], float | None] | None = None) -> T | None:
    """``wait_until`` for asyncio (the same loop, ``until``): ``ready()`` runs on the loop's
    thread (a short read on the caller's connection); between calls the coroutine awaits
    ``watcher.wait_async``."""
    return await drive_async(watcher, until(watcher, ready, timeout, next_deadline=next_deadline))

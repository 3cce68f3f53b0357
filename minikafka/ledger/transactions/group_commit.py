"""Group commit: single-row writes from many threads of one process share one durable commit.

Each thread of a process opens its own ``Source`` (a connection belongs to its thread), so
the writes of many threads meet here, in one ``GroupCommitter`` per ledger file and
process, with a connection of its own. A caller hands a unit of work (a function of the
connection, e.g. one row's INSERT) to ``run`` and blocks. The first waiting caller becomes
the leader: it takes every unit queued so far, runs each inside its own SAVEPOINT in one
``BEGIN IMMEDIATE`` transaction, commits (``synchronous = FULL``: the fsync), then hands
each caller its own result or exception. While the leader commits, newcomers queue up and
the next leader takes them all: no timer, no added latency for a lone writer.

Crash contract: ``run`` returns only after the COMMIT holding its unit returned, so every
row a caller was told about is durable; a unit whose statement failed (a duplicate key)
was rolled back to its savepoint alone and its caller gets the error; a failed COMMIT
fails every caller of the batch and nothing of it is stored.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from ...errors import LedgerError

__all__ = ["GroupCommitter", "committer_for", "flush", "release"]


class _Unit:
    __slots__ = ("work", "done", "lead", "result", "error", "wake")

    def __init__(self, work: Callable[[sqlite3.Connection], Any]):
        self.work = work
        self.done = False
        self.lead = False  # this unit's caller commits the next batch
        self.result: Any = None
        self.error: BaseException | None = None
        self.wake = threading.Event()


class GroupCommitter:
    """The shared writer of one ledger file in one process (see the module docstring).

    Followers sleep on their own event (no thundering herd): the leader wakes the callers of
    its batch once committed, and hands leadership to the first unit queued meanwhile.
    """

    def __init__(self, path: str, connect: Callable[[str], sqlite3.Connection]):
        self.path = path
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._cond = threading.Condition()
        self._queue: list[_Unit] = []
        self._leading = False
        self.users = 0
        self.commits = 0  # how many COMMITs ran (for tests and the benchmark)

    def run(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run ``work(conn)`` in the next group commit; returns its result once committed.

        Raises:
            whatever ``work`` raised (its savepoint rolled back, the others still commit), or
            the sqlite3.Error (or LedgerError) that kept the batch's transaction from beginning or
            committing.
        """
        unit = _Unit(work)
        with self._cond:
            self._queue.append(unit)
            if not self._leading:
                self._leading = unit.lead = True
        if not unit.lead:
            unit.wake.wait()
        if not unit.done:  # woken (or started) as the leader
            with self._cond:
                batch, self._queue = self._queue, []
            successor = None
            try:
                self._commit(batch)
            finally:
                with self._cond:
                    for u in batch:
                        u.done = True
                    if self._queue:
                        successor = self._queue[0]
                        successor.lead = True
                    else:
                        self._leading = False
                        self._cond.notify_all()  # flush() and release() wait for an idle committer
                for u in batch:
                    if u is not unit:
                        u.wake.set()
                if successor is not None:
                    successor.wake.set()
        if unit.error is not None:
            raise unit.error
        return unit.result

    def flush(self) -> None:
        """Wait until every unit queued in this process so far is committed (or failed)."""
        with self._cond:
            while self._queue or self._leading:
                self._cond.wait()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect(self.path)
        return self._conn

    def _commit(self, batch: list[_Unit]) -> None:
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
        except (sqlite3.Error, LedgerError) as exc:
            for u in batch:
                u.error = exc  # the ledger turns sqlite3 errors into its own (read-only, locked)
            return
        try:
            for u in batch:
                conn.execute("SAVEPOINT mk_group_row")
                try:
                    u.result = u.work(conn)
                except Exception as exc:  # this caller's error only; the batch goes on
                    u.error = exc
                    conn.execute("ROLLBACK TO mk_group_row")
                conn.execute("RELEASE mk_group_row")
            conn.execute("COMMIT")
            self.commits += 1
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for u in batch:
                u.result = None
                u.error = exc if isinstance(exc, sqlite3.Error) else LedgerError(f"commit failed on {self.path!r}: {exc}")

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()


_lock = threading.Lock()
_committers: dict[tuple[int, str], GroupCommitter] = {}


def _key(path: str) -> tuple[int, str]:
    return os.getpid(), os.path.realpath(os.path.expanduser(path))


def committer_for(path: str, connect: Callable[[str], sqlite3.Connection]) -> GroupCommitter:
    """The process's committer for the ledger at ``path`` (one more user; ``release`` when done).

    ``connect(path)`` opens its connection (``ledger.transactions.connection.connect`` with the ledger's settings).
    """
    key = _key(path)
    with _lock:
        committer = _committers.get(key)
        if committer is None:
            committer = _committers[key] = GroupCommitter(path, connect)
        committer.users += 1
        return committer


def release(committer: GroupCommitter) -> None:
    """One user fewer; the last one closes the committer's connection."""
    key = _key(committer.path)
    with _lock:
        committer.users -= 1
        if committer.users <= 0:
            if _committers.get(key) is committer:
                del _committers[key]
            with committer._cond:
                while committer._leading:
                    committer._cond.wait()
            committer.close()


def flush(path: str) -> None:
    """Wait for the process's group commits on ``path`` in flight or queued (none: return at once)."""
    with _lock:
        committer = _committers.get(_key(path))
    if committer is not None:
        committer.flush()

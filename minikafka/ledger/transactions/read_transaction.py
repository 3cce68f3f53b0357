"""One short read transaction: every read of a page (or report) sees one committed state.

A reader that keeps a transaction open pins the WAL: no checkpoint can pass the oldest
snapshot still in use, and the ``-wal`` file grows. So a tool that reads the ledger for a
person (the web console) gathers what it needs inside ``read_snapshot`` and leaves it before
it renders or sends anything; nothing ever holds one across requests or while streaming.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A deferred read transaction on ``conn`` for the duration of the block (joined when one is open).

    The transaction ends when the block does, raised or not; it never writes (a write inside
    it would be rolled back).
    """
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN DEFERRED")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

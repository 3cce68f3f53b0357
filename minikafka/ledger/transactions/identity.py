"""A ledger's identity: an id stored in the file when it is created, which no copy changes.

Two ledgers may share a file name (``staging/homelab.sqlite`` and ``prod/homelab.sqlite``)
and their snapshots one backup directory; what tells their snapshots apart is this id,
``ledger_id`` in ``_minikafka_meta`` (32 hex digits, random). A new ledger gets it with its
tables; a ledger written before identities existed gets one on its first writable open (or
its first backup), so a read-only open never writes. A snapshot is a copy and carries the
id inside; ``restore`` keeps the restored ledger's id (see ``restore``). A ledger copied
with ``cp`` is the same ledger as far as this id goes.
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

KEY = "ledger_id"


def read_identity(conn: sqlite3.Connection) -> str | None:
    """The id stored in the ledger open on ``conn`` (None: not a ledger, or none yet)."""
    try:
        row = conn.execute("SELECT value FROM _minikafka_meta WHERE key = ?", (KEY,)).fetchone()
    except sqlite3.OperationalError:  # no meta table: not a ledger
        return None
    return str(row[0]) if row else None


def ensure_identity_in_current_transaction(conn: sqlite3.Connection) -> str:
    """The ledger's id, stored now when it has none (inside the caller's write transaction)."""
    conn.execute("INSERT OR IGNORE INTO _minikafka_meta (key, value) VALUES (?, ?)", (KEY, uuid.uuid4().hex))
    found = read_identity(conn)
    assert found is not None
    return found


def set_identity_in_current_transaction(conn: sqlite3.Connection, ledger_id: str) -> None:
    conn.execute("INSERT INTO _minikafka_meta (key, value) VALUES (?, ?) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (KEY, ledger_id))


def identity_of_file(path: str | Path) -> str | None:
    """The id stored in the file at ``path``, read without writing (None: no file, not a
    ledger, or a ledger without an id yet)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return None
    conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    try:
        return read_identity(conn)
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()


def ensure_identity_of_file(path: str | Path, *, busy_timeout_ms: int = 30_000) -> str | None:
    """The id of the ledger at ``path``, given one now when it has none (one small write
    transaction that changes nothing else: no upgrade of an older format). None when the
    file is not a ledger or cannot be written (a read-only file keeps having no id).
    """
    found = identity_of_file(path)
    if found is not None:
        return found
    try:
        conn = sqlite3.connect(str(path), isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("BEGIN IMMEDIATE")
        try:
            exists = conn.execute(
                "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_minikafka_meta'").fetchone()
            made = ensure_identity_in_current_transaction(conn) if exists else None
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return made
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def set_identity_of_file(path: str | Path, ledger_id: str) -> None:
    """Store ``ledger_id`` in a private copy (a file no other process has open, in a
    rollback-journal mode: a snapshot being restored)."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        set_identity_in_current_transaction(conn, ledger_id)
        conn.execute("COMMIT")
    finally:
        conn.close()

"""Upgrading ledger files written by an older minikafka, inside the opening transaction.

Format 1 -> 2 (partitions and committed offsets): the catalog gains ``partitions``
(1) and ``key`` ([]); every topic table gains ``"_partition"`` (0 for every row) and its
index; ``_minikafka_acks`` gains ``partition`` (0). Existing ack state keeps its meaning:
'handled' rows are done for everyone, ack rows stay per-row acks above an offset of 0.
"""

from __future__ import annotations

import sqlite3

from .identifiers import quote_identifier
from .layout import PARTITION, PARTITION_COLUMN_DDL, partition_index_ddl


def stored_format(conn: sqlite3.Connection) -> int | None:
    """The format recorded in the file (None for a file without the ledger's tables)."""
    exists = conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_minikafka_meta'").fetchone()
    if not exists:
        return None
    row = conn.execute("SELECT value FROM _minikafka_meta WHERE key = 'format'").fetchone()
    return int(row[0]) if row else None


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({quote_identifier(table)})")}


def before_schema(conn: sqlite3.Connection, found: int) -> None:
    """Alter existing tables so the current CREATE statements and code apply to them."""
    if found < 2:
        if "partitions" not in _columns(conn, "_minikafka_topics"):
            conn.execute("ALTER TABLE _minikafka_topics ADD COLUMN partitions INTEGER NOT NULL DEFAULT 1")
            conn.execute("ALTER TABLE _minikafka_topics ADD COLUMN key TEXT NOT NULL DEFAULT '[]'")
        if "partition" not in _columns(conn, "_minikafka_acks"):
            conn.execute("ALTER TABLE _minikafka_acks ADD COLUMN partition INTEGER NOT NULL DEFAULT 0")
        for (name,) in conn.execute("SELECT name FROM _minikafka_topics").fetchall():
            if PARTITION not in _columns(conn, name):
                conn.execute(f"ALTER TABLE {quote_identifier(name)} ADD COLUMN {PARTITION_COLUMN_DDL}")
            conn.execute(partition_index_ddl(name))


def after_schema(conn: sqlite3.Connection, found: int, now: str) -> None:
    """Fill the tables the current format added (they exist by now)."""
    if found < 2:
        conn.execute("INSERT OR IGNORE INTO _minikafka_partitions (topic, partition, handled_upto) "
                     "SELECT name, 0, 0 FROM _minikafka_topics")
        conn.execute("INSERT OR IGNORE INTO _minikafka_offsets (consumer_id, partition, committed, updated_at) "
                     "SELECT id, 0, 0, ? FROM _minikafka_consumers", (now,))

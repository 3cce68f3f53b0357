"""Upgrading ledger files written by an older minikafka, inside the opening transaction.

Format 1 -> 2 (partitions and committed offsets): the catalog gains ``partitions``
(1) and ``key`` ([]); every topic table gains ``"_partition"`` (0 for every row; no index,
see format 5); ``_minikafka_acks`` gains ``partition`` (0). Existing ack state keeps its meaning:
'handled' rows are done for everyone, ack rows stay per-row acks above an offset of 0.

Format 2 -> 3 (positions and acks are the only state): the ``"_status"`` and
``"_handled_at"`` columns and the partial index on new rows leave every topic table, and
what they said moves into positions and acks, so every consumer and the topic-wide
status read exactly as before:

- a topic without consumers: its 'handled' rows (and rows below the old handled position)
  are handled for every consumer (``_minikafka_partitions.handled_upto``, folded; the rest
  in ``_minikafka_handled``);
- a topic with consumers: rows appended as handled (no handled time) are handled for
  every consumer; other 'handled' rows (acked by every consumer, or set handled) become
  done for each consumer: its offset folds over them, the rest become its acks.

Then each topic gets its status views (status.py). Cost: one pass over each topic's
rows (SQLite rewrites a table to drop a column), once.

Format 3 -> 4 (run status 'interrupted'): SQLite cannot change a CHECK constraint in
place, so ``_minikafka_runs`` is rebuilt: renamed aside before the CREATE statements run,
its rows copied into the new table after, the old one dropped. Every run keeps its row.

Format 4 -> 5 (no partition index on one-partition topics): every row of such a topic is
in partition 0, so reads go by id alone and the index on ``"_partition"`` only cost each
insert (about a quarter of a bulk insert's time); it is dropped. Rows are untouched.

Format 5 -> 6 (counts that do not scan, keys that stay in cache): ``_minikafka_row_counts``
is created and each topic's rows are marked (counts.py); each topic with dedup fields gains
the dedup hash ``"_key"`` with its unique index, and its index on the dedup fields keeps
only the rows whose hash collided (keys.py). Cost: one pass over each topic's rows and a
sort of its hashes, once.
"""

from __future__ import annotations

import sqlite3

from ...errors import LedgerError
from ..topics import counts, keys, status
from ..topics.identifiers import quote_identifier
from ..topics.layout import PARTITION, PARTITION_COLUMN_DDL

RUNS_ASIDE = "_minikafka_runs_before_format4"  # the old run log while the new one is created


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
            if PARTITION not in _columns(conn, name):  # one partition: no index on it (format 5)
                conn.execute(f"ALTER TABLE {quote_identifier(name)} ADD COLUMN {PARTITION_COLUMN_DDL}")
    if found < 3:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_minikafka_partitions'").fetchone()
        if exists and "updated_at" not in _columns(conn, "_minikafka_partitions"):
            conn.execute("ALTER TABLE _minikafka_partitions ADD COLUMN updated_at TEXT")
    if found < 5:
        for (name,) in conn.execute("SELECT name FROM _minikafka_topics WHERE partitions = 1").fetchall():
            conn.execute(f"DROP INDEX IF EXISTS {quote_identifier(name + '__partition')}")
    if found < 4 and "'interrupted'" not in _table_sql(conn, "_minikafka_runs"):
        conn.execute("DROP INDEX IF EXISTS _minikafka_runs_by_stage")  # the CREATE statements make it again
        conn.execute("DROP INDEX IF EXISTS _minikafka_runs_by_start")
        conn.execute(f"ALTER TABLE _minikafka_runs RENAME TO {RUNS_ASIDE}")


def _table_sql(conn: sqlite3.Connection, table: str) -> str:
    row = conn.execute("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return row[0] if row else ""


def after_schema(conn: sqlite3.Connection, found: int, now: str) -> None:
    """Fill the tables the current format added (they exist by now)."""
    if found < 2:
        conn.execute("INSERT OR IGNORE INTO _minikafka_partitions (topic, partition, handled_upto) "
                     "SELECT name, 0, 0 FROM _minikafka_topics")
        conn.execute("INSERT OR IGNORE INTO _minikafka_offsets (consumer_id, partition, committed, updated_at) "
                     "SELECT id, 0, 0, ? FROM _minikafka_consumers", (now,))
    if found < 3:
        for (name, partitions) in conn.execute("SELECT name, partitions FROM _minikafka_topics").fetchall():
            if "_status" in _columns(conn, name):
                _status_to_positions(conn, name, int(partitions), now)
                _drop_status_columns(conn, name)
            for statement in status.drop_view_ddl(name) + status.view_ddl(name):
                conn.execute(statement)
    if found < 6:
        from ..topics.catalog import read_layout

        for (name,) in conn.execute("SELECT name FROM _minikafka_topics").fetchall():
            counts.note_appended_in_current_transaction(conn, name)
            layout = read_layout(conn, name)
            if layout.dedup and keys.KEY not in _columns(conn, name):
                keys.add_key_in_current_transaction(conn, layout)
    if found < 4 and _table_sql(conn, RUNS_ASIDE):
        columns = ", ".join(quote_identifier(r[1]) for r in conn.execute(f"PRAGMA table_info({RUNS_ASIDE})"))
        conn.execute(f"INSERT INTO _minikafka_runs ({columns}) SELECT {columns} FROM {RUNS_ASIDE}")
        conn.execute(f"DROP TABLE {RUNS_ASIDE}")


def _status_to_positions(conn: sqlite3.Connection, topic: str, partitions: int, now: str) -> None:
    """Move what ``"_status"``/``"_handled_at"`` said into positions and acks (see the module doc)."""
    table = quote_identifier(topic)
    consumers = [r[0] for r in conn.execute("SELECT id FROM _minikafka_consumers WHERE topic = ?", (topic,))]
    # handled for every consumer: with no consumer, every 'handled' row; else rows appended as handled
    explicit = "\"_status\" = 'handled'" + ("" if not consumers else ' AND "_handled_at" IS NULL')
    for partition in range(partitions):
        conn.execute("INSERT OR IGNORE INTO _minikafka_partitions (topic, partition, handled_upto) VALUES (?, ?, 0)",
                     (topic, partition))
        old = conn.execute("SELECT handled_upto FROM _minikafka_partitions WHERE topic = ? AND partition = ?",
                           (topic, partition)).fetchone()[0]
        start = 0 if consumers else old  # with consumers, their offsets cover the old position
        first = conn.execute(
            f'SELECT min("_id") FROM {table} WHERE "_partition" = ? AND "_id" > ? AND NOT ({explicit})',
            (partition, start)).fetchone()[0]
        if first is None:
            first = (conn.execute(f'SELECT max("_id") FROM {table} WHERE "_partition" = ?',
                                  (partition,)).fetchone()[0] or 0) + 1
        position = max(start, first - 1)
        conn.execute("UPDATE _minikafka_partitions SET handled_upto = ?, updated_at = ? WHERE topic = ? "
                     "AND partition = ?", (position, now, topic, partition))
        conn.execute(
            f"INSERT OR IGNORE INTO _minikafka_handled (topic, row_id, partition, handled_at) "
            f"SELECT ?, \"_id\", \"_partition\", coalesce(\"_handled_at\", ?) FROM {table} "
            f"WHERE \"_partition\" = ? AND \"_id\" > ? AND {explicit}",
            (topic, now, partition, position))
        for cid in consumers:
            _fold_consumer(conn, table, topic, cid, partition, position, explicit, now)


def _fold_consumer(conn: sqlite3.Connection, table: str, topic: str, cid: int, partition: int, position: int,
                   explicit: str, now: str) -> None:
    """Rows 'handled' (not for everyone) above the consumer's offset become done for it."""
    row = conn.execute("SELECT committed FROM _minikafka_offsets WHERE consumer_id = ? AND partition = ?",
                       (cid, partition)).fetchone()
    committed = row[0] if row else 0
    acked = 'EXISTS (SELECT 1 FROM _minikafka_acks a WHERE a.consumer_id = ? AND a.row_id = "_id")'
    low = max(committed, position)
    nxt = conn.execute(
        f"SELECT min(\"_id\") FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_status\" = 'new' "
        f"AND NOT {acked}", (partition, low, cid)).fetchone()[0]
    if nxt is None:
        nxt = (conn.execute(f'SELECT max("_id") FROM {table} WHERE "_partition" = ?',
                            (partition,)).fetchone()[0] or 0) + 1
    new = max(committed, nxt - 1)
    if new > committed:
        conn.execute(
            "INSERT INTO _minikafka_offsets (consumer_id, partition, committed, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (consumer_id, partition) DO UPDATE SET committed = excluded.committed, "
            "updated_at = excluded.updated_at", (cid, partition, new, now))
        conn.execute("DELETE FROM _minikafka_acks WHERE consumer_id = ? AND partition = ? AND row_id <= ?",
                     (cid, partition, new))
    conn.execute(
        f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) "
        f"SELECT ?, \"_id\", coalesce(\"_handled_at\", ?), \"_partition\" FROM {table} "
        f"WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_status\" = 'handled' AND NOT ({explicit})",
        (cid, now, partition, new))


def _drop_status_columns(conn: sqlite3.Connection, topic: str) -> None:
    """Drop the status columns (SQLite refuses while a view or trigger of the user's reads them).

    Raises:
        LedgerError: such a view or trigger; it is named, and the opening transaction rolls back.
    """
    conn.execute(f"DROP INDEX IF EXISTS {quote_identifier(topic + '__new')}")
    for column in ("_status", "_handled_at"):
        try:
            conn.execute(f"ALTER TABLE {quote_identifier(topic)} DROP COLUMN {quote_identifier(column)}")
        except sqlite3.OperationalError as exc:
            raise LedgerError(
                f"cannot upgrade to ledger format 3: it removes column {column} of topic {topic!r}, and SQLite "
                f"refuses ({exc}); drop or change what reads it (its status is now in the view "
                f"{status.status_view_name(topic)!r}), then open the ledger again. Nothing was changed."
            ) from exc

"""The windows table: a streaming consumer's windows, stored before their function runs.

A window is a consumer's row range (``first_offset..last_offset``, the rows that were
pending for it there when the window was decided) or, for custom emitters, an explicit
list of row ids; plus a time range. ``open`` windows are offered (again, after a crash or
an exception) until their commit turns them ``committed``, in the same transaction that
acks their rows. Also: retention settings and the positions of followed files.

Functions named ``..._in_current_transaction`` never commit.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from ...util.redact import redact_and_cut
from ..topics import acks
from ..topics.identifiers import quote_identifier
from ..topics.layout import TopicLayout
from ..topics.table import TopicTable

COLUMNS = ("window_id", "kind", "first_offset", "last_offset", "rows", "row_ids", "start", '"end"', "state",
           "attempts", "last_error", "run_id", "created_at", "committed_at")


@dataclass
class StoredWindow:
    """One row of ``_minikafka_windows``."""

    window_id: int
    kind: str
    first_offset: int
    last_offset: int
    rows: int
    row_ids: list[int] | None
    start: str | None
    end: str | None
    state: str
    attempts: int = 0
    last_error: str | None = None
    run_id: str | None = None
    created_at: str | None = None
    committed_at: str | None = None

    @classmethod
    def from_row(cls, row: tuple) -> StoredWindow:
        values = list(row)
        values[5] = None if values[5] is None else json.loads(values[5])
        return cls(*values)


def _select(where: str) -> str:
    return f"SELECT {', '.join(COLUMNS)} FROM _minikafka_windows WHERE consumer_id = ? {where}"


def open_windows(conn: sqlite3.Connection, consumer_id: int) -> list[StoredWindow]:
    """The consumer's open windows, oldest first."""
    rows = conn.execute(_select("AND state = 'open' ORDER BY window_id"), (consumer_id,)).fetchall()
    return [StoredWindow.from_row(r) for r in rows]


def last_window(conn: sqlite3.Connection, consumer_id: int) -> StoredWindow | None:
    row = conn.execute(_select("ORDER BY window_id DESC LIMIT 1"), (consumer_id,)).fetchone()
    return None if row is None else StoredWindow.from_row(row)


def windows(conn: sqlite3.Connection, consumer_id: int, *, limit: int = 100) -> list[StoredWindow]:
    """Most recent windows first."""
    rows = conn.execute(_select("ORDER BY window_id DESC LIMIT ?"), (consumer_id, limit)).fetchall()
    return [StoredWindow.from_row(r) for r in rows]


def store_window_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, window: StoredWindow,
                                        now: str) -> None:
    conn.execute(
        "INSERT INTO _minikafka_windows (consumer_id, window_id, kind, first_offset, last_offset, rows, row_ids, "
        "start, \"end\", state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?)",
        (consumer_id, window.window_id, window.kind, window.first_offset, window.last_offset, window.rows,
         None if window.row_ids is None else json.dumps(window.row_ids), window.start, window.end, now),
    )


def record_failure_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, window_id: int,
                                          error: str) -> int:
    """Count a failed attempt on an open window; returns its attempts so far."""
    row = conn.execute(
        "UPDATE _minikafka_windows SET attempts = attempts + 1, last_error = ? "
        "WHERE consumer_id = ? AND window_id = ? AND state = 'open' RETURNING attempts",
        (redact_and_cut(error, 10000), consumer_id, window_id),  # masked, then cut
    ).fetchone()
    return row[0] if row else 0


def window_rows(conn: sqlite3.Connection, layout: TopicLayout, consumer_id: int | None,
                window: StoredWindow) -> list[tuple]:
    """The window's rows (``select_sql`` rows), in offset order."""
    table = TopicTable(conn, layout)
    if window.row_ids is not None:
        return table.page(0, -1, '"_id" IN (SELECT value FROM json_each(?))', (json.dumps(window.row_ids),))
    pending, params = acks.pending_filter(consumer_id)
    return table.page(window.first_offset - 1, -1, pending, params, upto=window.last_offset)


def pending_span(table: TopicTable, consumer_id: int, floor: int, *,
                 created_before: str | None = None) -> tuple[int | None, int | None, int, str | None]:
    """(lowest id, highest id, rows, earliest ``_created_at``) of the rows pending for the consumer
    above ``floor`` (only those created before ``created_before``): what a time window decides on."""
    pending, params = acks.pending_filter(consumer_id)
    where, more = f'{pending} AND "_id" > ?', (*params, floor)
    if created_before is not None:
        where, more = f'{where} AND "_created_at" < ?', (*more, created_before)
    return table.aggregate('min("_id"), max("_id"), count(*), min("_created_at")', where, more)


def nth_pending(table: TopicTable, consumer_id: int, floor: int, n: int) -> tuple[int, str] | None:
    """(id, ``_created_at``) of the ``n``-th row (1: the first) pending for the consumer above
    ``floor``, in id order (None when fewer are pending): what a count window decides on."""
    pending, params = acks.pending_filter(consumer_id)
    return table.aggregate('"_id", "_created_at"', f'{pending} AND "_id" > ? ORDER BY "_id" LIMIT 1 OFFSET ?',
                           (*params, floor, n - 1))


def commit_window_in_current_transaction(conn: sqlite3.Connection, topic: str, consumer_id: int,
                                         window: StoredWindow, run_id: str, now: str) -> bool:
    """Ack the window's rows for the consumer and mark it committed.

    Returns False (and changes nothing) when the window is not open any more: another
    process committed it.
    """
    state = conn.execute(
        "SELECT state FROM _minikafka_windows WHERE consumer_id = ? AND window_id = ?",
        (consumer_id, window.window_id),
    ).fetchone()
    if state is None or state[0] != "open":
        return False
    if window.row_ids is not None:
        acks.ack_many_in_current_transaction(conn, topic, list(window.row_ids), consumer_id, now,
                                             acks.consumer_ids(conn, topic))
    elif window.rows:
        table = quote_identifier(topic)
        pending, params = acks.pending_filter(consumer_id)
        below = conn.execute(
            f"SELECT 1 FROM {table} WHERE {pending} AND \"_id\" < ? LIMIT 1", (*params, window.first_offset)
        ).fetchone()
        if below is None:  # the usual case: the window is the consumer's oldest pending rows
            acks.ack_upto_in_current_transaction(conn, topic, consumer_id, window.last_offset, now)
        else:  # rows replayed below the window stay pending for a later window
            ids = [r[0] for r in conn.execute(
                f"SELECT \"_id\" FROM {table} WHERE {pending} AND \"_id\" BETWEEN ? AND ?",
                (*params, window.first_offset, window.last_offset))]
            acks.ack_many_in_current_transaction(conn, topic, ids, consumer_id, now, acks.consumer_ids(conn, topic))
    conn.execute(
        "UPDATE _minikafka_windows SET state = 'committed', committed_at = ?, run_id = ? "
        "WHERE consumer_id = ? AND window_id = ?",
        (now, run_id, consumer_id, window.window_id),
    )
    return True


def prune_windows_in_current_transaction(conn: sqlite3.Connection, topic: str, older_than: str) -> int:
    """Forget committed windows older than ``older_than`` (the newest per consumer is kept)."""
    return conn.execute(
        "DELETE FROM _minikafka_windows AS w WHERE state = 'committed' AND committed_at < ? "
        "AND consumer_id IN (SELECT id FROM _minikafka_consumers WHERE topic = ?) "
        "AND window_id < (SELECT max(window_id) FROM _minikafka_windows m WHERE m.consumer_id = w.consumer_id)",
        (older_than, topic),
    ).rowcount


# -- positions of followed sources ---------------------------------------------------------
def read_position(conn: sqlite3.Connection, key: str) -> dict | None:
    row = conn.execute("SELECT position FROM _minikafka_positions WHERE key = ?", (key,)).fetchone()
    return None if row is None else json.loads(row[0])


def save_position_in_current_transaction(conn: sqlite3.Connection, key: str, topic: str, position: dict,
                                         now: str) -> None:
    conn.execute(
        "INSERT INTO _minikafka_positions (key, topic, position, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (key) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at",
        (key, topic, json.dumps(position), now),
    )

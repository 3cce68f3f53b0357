"""The quarantine (dead-letter) table: list, read, remove rows. Model-free.

Rows come from three places, told apart by ``origin``:

- ``stage``: an input row a stage gave up on after ``max_attempts``; ``row_id`` is the
  row's id in ``topic`` and ``consumer`` the stage's consumer.
- ``quality``: an output row that failed a row-level expectation; ``topic`` is the
  output topic, ``payload`` the row as JSON, ``row_id`` its parent's id.
- ``FILE:LINE``: a line of an ingested or backfilled file that did not validate;
  ``payload`` is the raw line.
- ``delivery``: a row an HTTP delivery gave up on after ``max_attempts``; ``consumer``
  is the group, ``row_id`` the row (requeueing makes it pending for the group again).

Requeueing needs the topic's model and lives in ``api.core.requeue``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any, NamedTuple

from ...util.redact import redact_secrets

COLUMNS = ("id", "topic", "consumer", "run_id", "row_id", "payload", "reason", "attempts", "origin", "created_at")
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM _minikafka_quarantine"


class Quarantined(NamedTuple):
    """One row going into the quarantine (the columns every writer fills, then the optional ones)."""

    topic: str
    payload: str | None
    reason: str
    origin: str | None
    created_at: str
    consumer: str | None = None
    run_id: str | None = None
    row_id: int | None = None
    attempts: int = 1


_INSERT = ("INSERT INTO _minikafka_quarantine (topic, payload, reason, origin, created_at, consumer, run_id, "
           "row_id, attempts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")


def quarantine_in_current_transaction(conn: sqlite3.Connection, rows: Iterable[Quarantined]) -> int:
    """Insert rows into the quarantine in the caller's transaction: the one writer of the table.

    Returns:
        The number of rows inserted.
    """
    before = conn.total_changes
    # a reason may quote an error and the error a secret: kept masked (the payload is the data itself)
    conn.executemany(_INSERT, ((*r[:2], redact_secrets(r[2]), *r[3:]) for r in rows))
    return conn.total_changes - before


def known_origins(conn: sqlite3.Connection, topic: str, origin_prefix: str) -> set[tuple[str, str]]:
    """(origin, payload) of the quarantined rows of ``topic`` whose origin starts with ``origin_prefix``."""
    return {
        (origin, payload) for origin, payload in conn.execute(
            "SELECT origin, payload FROM _minikafka_quarantine WHERE topic = ? AND substr(origin, 1, ?) = ?",
            (topic, len(origin_prefix), origin_prefix))
    }


def _as_dicts(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    return [dict(zip(COLUMNS, r)) for r in cur.fetchall()]


def list_quarantined(conn: sqlite3.Connection, topic: str | None = None, *, limit: int | None = 100,
                     ids: list[int] | None = None, oldest_first: bool = False, origin: str | None = None,
                     reason: str | None = None, below: int | None = None) -> list[dict[str, Any]]:
    """Quarantined rows (of one topic, or every topic), newest first unless ``oldest_first``.

    Args:
        topic: only rows of this topic (None: every topic).
        limit: at most this many rows (None: all).
        ids: only these quarantine ids.
        origin: only rows whose origin begins with this text (``stage``, ``quality``, ``queue``,
            ``delivery``, or a file's path).
        reason: only rows whose reason contains this text.
        below: only rows with a quarantine id below this one (the next page, newest first).
    """
    where, params = ["1"], []
    if topic is not None:
        where.append("topic = ?")
        params.append(topic)
    if ids is not None:
        where.append(f"id IN ({', '.join('?' for _ in ids)})")
        params.extend(ids)
    if origin:
        where.append("substr(origin, 1, ?) = ?")
        params.extend((len(origin), origin))
    if reason:
        where.append("instr(reason, ?) > 0")
        params.append(reason)
    if below is not None:
        where.append("id < ?")
        params.append(below)
    order = "ASC" if oldest_first else "DESC"
    sql = f"{_SELECT} WHERE {' AND '.join(where)} ORDER BY id {order}"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return _as_dicts(conn.execute(sql, params))


def get_quarantined(conn: sqlite3.Connection, quarantine_id: int) -> dict[str, Any] | None:
    """One quarantined row by its quarantine id, or None."""
    rows = _as_dicts(conn.execute(f"{_SELECT} WHERE id = ?", (quarantine_id,)))
    return rows[0] if rows else None


def count_quarantined(conn: sqlite3.Connection, topic: str | None = None) -> int:
    """Rows in the quarantine (of ``topic``, or of every topic)."""
    if topic is None:
        return conn.execute("SELECT count(*) FROM _minikafka_quarantine").fetchone()[0]
    return conn.execute("SELECT count(*) FROM _minikafka_quarantine WHERE topic = ?", (topic,)).fetchone()[0]


def purge_in_current_transaction(conn: sqlite3.Connection, topic: str, *, ids: list[int] | None = None,
                                 before: str | None = None) -> int:
    """Delete quarantined rows of ``topic`` (only ``ids``, only those created before ``before``).

    Returns the number of rows deleted.
    """
    where, params = ["topic = ?"], [topic]
    if ids is not None:
        where.append(f"id IN ({', '.join('?' for _ in ids)})")
        params.extend(ids)
    if before is not None:
        where.append("created_at < ?")
        params.append(before)
    return conn.execute(f"DELETE FROM _minikafka_quarantine WHERE {' AND '.join(where)}", params).rowcount


def note_failed_requeue_in_current_transaction(conn: sqlite3.Connection, quarantine_id: int, reason: str) -> None:
    """A requeue that failed again: count the attempt and keep the newest reason."""
    conn.execute("UPDATE _minikafka_quarantine SET attempts = attempts + 1, reason = ? WHERE id = ?",
                 (redact_secrets(reason), quarantine_id))


def quarantine_topics_and_origins(conn: sqlite3.Connection, since: str = "") -> list[tuple[str, str, int, int]]:
    """(topic, origin kind, rows, rows quarantined at or after ``since``) of the quarantine: a file
    line's origin (``PATH:LINE``) counted as ``file``, every other origin as itself."""
    return conn.execute(
        "SELECT topic, CASE WHEN origin IN ('stage', 'quality', 'queue', 'delivery') THEN origin "
        "WHEN origin GLOB '*:[0-9]*' THEN 'file' ELSE coalesce(origin, '') END, "
        "count(*), count(CASE WHEN created_at >= ? THEN 1 END) FROM _minikafka_quarantine GROUP BY 1, 2 ORDER BY 1, 2",
        (since,)).fetchall()


def quarantined_ever(conn: sqlite3.Connection) -> int:
    """Rows ever quarantined in the ledger, all topics (the quarantine's AUTOINCREMENT sequence:
    it never goes down, whatever is requeued or purged; 0 before the first)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = '_minikafka_quarantine'").fetchone()
    return int(row[0]) if row else 0

"""The notifications table: insert, read after an id, prune. Payloads arrive as JSON text.

Validation of channels and payloads, and the listener, live in ``api.core.notifications``.
"""

from __future__ import annotations

import sqlite3


def insert_in_current_transaction(conn: sqlite3.Connection, channel: str, payload: str | None,
                                  created_at: str) -> int:
    """Insert one notification in the caller's transaction; returns its id."""
    cur = conn.execute(
        "INSERT INTO _minikafka_notifications (channel, payload, created_at) VALUES (?, ?, ?)",
        (channel, payload, created_at),
    )
    return cur.lastrowid


def last_id(conn: sqlite3.Connection, channel: str) -> int:
    """The newest notification id on ``channel`` (0 when there is none)."""
    return conn.execute(
        "SELECT coalesce(max(id), 0) FROM _minikafka_notifications WHERE channel = ?", (channel,)
    ).fetchone()[0]


def read_after(conn: sqlite3.Connection, channel: str, after: int, limit: int) -> list[tuple]:
    """(id, channel, payload, created_at) of the notifications on ``channel`` above ``after``, oldest first."""
    return conn.execute(
        "SELECT id, channel, payload, created_at FROM _minikafka_notifications "
        "WHERE channel = ? AND id > ? ORDER BY id LIMIT ?",
        (channel, after, limit),
    ).fetchall()


def prune_in_current_transaction(conn: sqlite3.Connection, before: str | None, max_keep: int | None) -> int:
    """Delete notifications created before ``before`` OR beyond the newest ``max_keep``; returns the count."""
    conditions: list[str] = []
    params: list = []
    if before is not None:
        conditions.append("created_at < ?")
        params.append(before)
    if max_keep is not None:
        # by rank, not by id arithmetic: ids have gaps after rollbacks and earlier prunes
        conditions.append(
            "id <= coalesce((SELECT id FROM _minikafka_notifications ORDER BY id DESC LIMIT 1 OFFSET ?), 0)"
        )
        params.append(min(max_keep, 2**63 - 1))
    if not conditions:
        return 0
    return conn.execute(f"DELETE FROM _minikafka_notifications WHERE {' OR '.join(conditions)}", params).rowcount

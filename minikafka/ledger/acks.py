"""Per-consumer ack state of topic rows.

A row's ``_status`` is 'handled' once every consumer registered on its topic acked it.
Acks of rows that are still 'new' for some other consumer live in ``_minikafka_acks``;
when the last consumer acks, the row turns 'handled' and those ack rows are deleted.
With zero or one consumer the status column alone is the ack state (minikafka's
behaviour), so the common case costs one UPDATE per ack.

All functions here run inside the caller's transaction (they never commit).
"""

from __future__ import annotations

import sqlite3

from ..errors import ConsumerNotFoundError
from .identifiers import quote_identifier, validate_consumer_name


def consumer_ids(conn: sqlite3.Connection, topic: str) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT id FROM _minikafka_consumers WHERE topic = ? ORDER BY id", (topic,)
    )]


def consumer_names(conn: sqlite3.Connection, topic: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT name FROM _minikafka_consumers WHERE topic = ? ORDER BY id", (topic,)
    )]


def find_consumer(conn: sqlite3.Connection, topic: str, name: str) -> int | None:
    row = conn.execute(
        "SELECT id FROM _minikafka_consumers WHERE topic = ? AND name = ?", (topic, name)
    ).fetchone()
    return row[0] if row else None


def require_consumer(conn: sqlite3.Connection, topic: str, name: str) -> int:
    found = find_consumer(conn, topic, name)
    if found is None:
        raise ConsumerNotFoundError(
            f"consumer {name!r} is not registered on topic {topic!r} "
            f"(registered: {consumer_names(conn, topic)!r})"
        )
    return found


def register_consumer_in_current_transaction(
    conn: sqlite3.Connection, topic: str, name: str, now: str
) -> int:
    """Register ``name`` on ``topic`` (idempotent) and return its id.

    A new consumer starts from the topic's current state: rows already 'handled'
    count as done for it, rows still 'new' are pending for it.
    """
    validate_consumer_name(name)
    found = find_consumer(conn, topic, name)
    if found is not None:
        return found
    cur = conn.execute(
        "INSERT INTO _minikafka_consumers (topic, name, created_at) VALUES (?, ?, ?)", (topic, name, now)
    )
    return cur.lastrowid


def pending_filter(consumer_id: int | None) -> tuple[str, tuple]:
    """SQL condition (on alias-free topic table) for rows still to do for a consumer."""
    if consumer_id is None:
        return "\"_status\" = 'new'", ()
    return (
        "\"_status\" = 'new' AND NOT EXISTS (SELECT 1 FROM _minikafka_acks a "
        "WHERE a.consumer_id = ? AND a.row_id = \"_id\")",
        (consumer_id,),
    )


def done_filter(consumer_id: int | None) -> tuple[str, tuple]:
    """SQL condition for rows a consumer (or, with None, every consumer) has acked."""
    if consumer_id is None:
        return "\"_status\" = 'handled'", ()
    return (
        "(\"_status\" = 'handled' OR EXISTS (SELECT 1 FROM _minikafka_acks a "
        "WHERE a.consumer_id = ? AND a.row_id = \"_id\"))",
        (consumer_id,),
    )


def _mark_handled(conn, table: str, row_id: int, now: str) -> bool:
    cur = conn.execute(
        f"UPDATE {table} SET \"_status\" = 'handled', \"_handled_at\" = ? "
        "WHERE \"_id\" = ? AND \"_status\" = 'new'",
        (now, row_id),
    )
    return cur.rowcount > 0


def ack_in_current_transaction(
    conn: sqlite3.Connection, topic: str, row_id: int, consumer_id: int | None, now: str,
    consumers: list[int] | None = None,
) -> bool:
    """Ack one row for one consumer (None = for every consumer).

    Returns True if the row turned 'handled' by this ack.
    """
    table = quote_identifier(topic)
    consumers = consumer_ids(conn, topic) if consumers is None else consumers
    if consumer_id is None or len(consumers) <= 1:
        changed = _mark_handled(conn, table, row_id, now)
        if changed and consumers:
            _forget_acks(conn, consumers, row_id)
        return changed
    conn.execute(
        f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at) "
        f"SELECT ?, \"_id\", ? FROM {table} WHERE \"_id\" = ? AND \"_status\" = 'new'",
        (consumer_id, now, row_id),
    )
    marks = ", ".join("?" for _ in consumers)
    n = conn.execute(
        f"SELECT count(*) FROM _minikafka_acks WHERE row_id = ? AND consumer_id IN ({marks})",
        (row_id, *consumers),
    ).fetchone()[0]
    if n < len(consumers):
        return False
    changed = _mark_handled(conn, table, row_id, now)
    _forget_acks(conn, consumers, row_id)
    return changed


def ack_many_in_current_transaction(
    conn: sqlite3.Connection, topic: str, row_ids: list[int], consumer_id: int | None, now: str,
    consumers: list[int],
) -> None:
    """Ack many rows for one consumer (None = every consumer); no per-row result."""
    if consumer_id is not None and len(consumers) > 1:
        for row_id in row_ids:
            ack_in_current_transaction(conn, topic, row_id, consumer_id, now, consumers)
        return
    table = quote_identifier(topic)
    conn.executemany(
        f"UPDATE {table} SET \"_status\" = 'handled', \"_handled_at\" = ? "
        "WHERE \"_id\" = ? AND \"_status\" = 'new'",
        [(now, row_id) for row_id in row_ids],
    )
    if len(consumers) > 1:
        marks = ", ".join("?" for _ in consumers)
        conn.executemany(
            f"DELETE FROM _minikafka_acks WHERE row_id = ? AND consumer_id IN ({marks})",
            [(row_id, *consumers) for row_id in row_ids],
        )


def _forget_acks(conn, consumers: list[int], row_id: int) -> None:
    marks = ", ".join("?" for _ in consumers)
    conn.execute(
        f"DELETE FROM _minikafka_acks WHERE row_id = ? AND consumer_id IN ({marks})", (row_id, *consumers)
    )


def replay_in_current_transaction(
    conn: sqlite3.Connection, topic: str, consumer_id: int, lo: int, hi: int, now: str
) -> int:
    """Make rows with ``lo <= _id <= hi`` pending again for one consumer.

    Rows that were 'handled' turn 'new' with acks kept for every other consumer, so
    only this consumer sees them again. Returns the number of rows made pending.
    """
    table = quote_identifier(topic)
    others = [c for c in consumer_ids(conn, topic) if c != consumer_id]
    removed = conn.execute(
        "DELETE FROM _minikafka_acks WHERE consumer_id = ? AND row_id BETWEEN ? AND ?",
        (consumer_id, lo, hi),
    ).rowcount
    for other in others:
        conn.execute(
            f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at) "
            f"SELECT ?, \"_id\", ? FROM {table} WHERE \"_status\" = 'handled' AND \"_id\" BETWEEN ? AND ?",
            (other, now, lo, hi),
        )
    reopened = conn.execute(
        f"UPDATE {table} SET \"_status\" = 'new', \"_handled_at\" = NULL "
        "WHERE \"_status\" = 'handled' AND \"_id\" BETWEEN ? AND ?",
        (lo, hi),
    ).rowcount
    conn.execute(
        "DELETE FROM _minikafka_attempts WHERE consumer_id = ? AND row_id BETWEEN ? AND ?",
        (consumer_id, lo, hi),
    )
    return reopened + removed


def drop_consumer_in_current_transaction(conn: sqlite3.Connection, topic: str, consumer_id: int, now: str) -> int:
    """Unregister a consumer; rows now acked by every remaining consumer turn 'handled'."""
    conn.execute("DELETE FROM _minikafka_consumers WHERE id = ?", (consumer_id,))
    remaining = consumer_ids(conn, topic)
    if not remaining:
        return 0
    table = quote_identifier(topic)
    marks = ", ".join("?" for _ in remaining)
    done = conn.execute(
        f"UPDATE {table} SET \"_status\" = 'handled', \"_handled_at\" = ? WHERE \"_status\" = 'new' "
        f"AND (SELECT count(*) FROM _minikafka_acks a WHERE a.row_id = \"_id\" AND a.consumer_id IN ({marks})) = ?",
        (now, *remaining, len(remaining)),
    ).rowcount
    conn.execute(
        f"DELETE FROM _minikafka_acks WHERE consumer_id IN ({marks}) AND row_id IN "
        f"(SELECT \"_id\" FROM {table} WHERE \"_status\" = 'handled')",
        tuple(remaining),
    )
    return done


def ack_upto_in_current_transaction(
    conn: sqlite3.Connection, topic: str, consumer_id: int, upto: int, now: str, *, exclude: bool = False
) -> int:
    """Ack every row still pending for a consumer with ``_id <= upto``, set-based.

    With ``exclude``, ids in ``temp.mk_exclude`` are left pending (rows that failed).
    Cost grows with the topic's pending rows (partial index), never with its history.
    Returns the number of rows acked for this consumer.
    """
    table = quote_identifier(topic)
    consumers = consumer_ids(conn, topic)
    skip = ' AND "_id" NOT IN (SELECT id FROM temp.mk_exclude)' if exclude else ""
    pending, params = pending_filter(consumer_id)
    if len(consumers) <= 1:
        return conn.execute(
            f"UPDATE {table} SET \"_status\" = 'handled', \"_handled_at\" = ? "
            f"WHERE \"_status\" = 'new' AND \"_id\" <= ?{skip}",
            (now, upto),
        ).rowcount
    acked = conn.execute(
        f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at) "
        f"SELECT ?, \"_id\", ? FROM {table} WHERE {pending} AND \"_id\" <= ?{skip}",
        (consumer_id, now, *params, upto),
    ).rowcount
    marks = ", ".join("?" for _ in consumers)
    conn.execute(
        f"UPDATE {table} SET \"_status\" = 'handled', \"_handled_at\" = ? WHERE \"_status\" = 'new' "
        f"AND \"_id\" <= ? AND (SELECT count(*) FROM _minikafka_acks a WHERE a.row_id = \"_id\" "
        f"AND a.consumer_id IN ({marks})) = ?",
        (now, upto, *consumers, len(consumers)),
    )
    conn.execute(
        f"DELETE FROM _minikafka_acks WHERE consumer_id IN ({marks}) AND row_id <= ? AND EXISTS "
        f"(SELECT 1 FROM {table} t WHERE t.\"_id\" = row_id AND t.\"_status\" = 'handled')",
        (*consumers, upto),
    )
    return acked

"""HTTP delivery state: the batch in flight per (group, partition) and who may deliver it.

Two tables, both keyed by (consumer id of the group, partition):

- ``_minikafka_inflight``: the batch a delivery worker is sending (first and last offset,
  rows, attempts, the last failure). Written before the POST, deleted in the transaction
  that commits the batch, so a worker that died re-sends exactly that batch, with the same
  ``Idempotency-Key`` (group/topic/partition/first-last), before anything new.
- ``_minikafka_delivery_leases``: which worker delivers the partition now (an owner text,
  ``host:pid:nonce``, and an expiry in milliseconds since the epoch). A worker takes the
  lease before it fetches, renews it while it delivers, and every write of a batch (in
  flight, committed, quarantined) checks in its own transaction that the lease is still
  its own. So two workers on one group (a second started by mistake, two cron runs
  overlapping) never deliver one partition at the same time, and a worker that lost its
  lease (it stalled past the expiry and another took over) commits nothing: the new
  owner re-sends the batch in flight under the same key.

Committing a batch moves the group's offset when nothing pending for the group lies
below the batch (the usual case, constant cost); when a row below it was made pending
again meanwhile (a requeued delivery failure) it acks exactly the batch's rows instead,
so the requeued row is delivered next and never skipped.

All functions run inside the caller's transaction (they never commit).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from ..topics import acks
from ..topics.identifiers import quote_identifier
from . import quarantine as quarantined


# -- leases ------------------------------------------------------------------------------
def lease_holder(conn: sqlite3.Connection, consumer_id: int, partition: int) -> tuple[str, int] | None:
    """(owner, expires_at in ms) of the partition's lease, or None when nobody holds one."""
    row = conn.execute("SELECT owner, expires_at FROM _minikafka_delivery_leases WHERE consumer_id = ? "
                       "AND partition = ?", (consumer_id, partition)).fetchone()
    return None if row is None else (row[0], row[1])


def acquire_lease_in_current_transaction(
    conn: sqlite3.Connection, consumer_id: int, partition: int, owner: str, now_ms: int, ttl_ms: int,
    *, gone: Callable[[str], bool] | None = None,
) -> str | None:
    """Take (or renew) the partition's lease for ``owner`` until ``now_ms + ttl_ms``.

    The lease is taken when nobody holds it, ``owner`` holds it already, it expired, or
    ``gone(holder)`` says its holder no longer exists (a process on this host that died).

    Returns:
        None when ``owner`` holds the lease now, else the current holder's owner text.
    """
    held = lease_holder(conn, consumer_id, partition)
    if held is not None and held[0] != owner and held[1] > now_ms and not (gone is not None and gone(held[0])):
        return held[0]
    conn.execute(
        "INSERT INTO _minikafka_delivery_leases (consumer_id, partition, owner, expires_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (consumer_id, partition) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at",
        (consumer_id, partition, owner, now_ms + ttl_ms))
    return None


def holds_lease(conn: sqlite3.Connection, consumer_id: int, partition: int, owner: str) -> bool:
    """``owner`` holds the partition's lease (an expired lease nobody took is still its own)."""
    held = lease_holder(conn, consumer_id, partition)
    return held is not None and held[0] == owner


def renew_leases_in_current_transaction(conn: sqlite3.Connection, owner: str, now_ms: int, ttl_ms: int) -> int:
    """Push the expiry of every lease ``owner`` holds to ``now_ms + ttl_ms``; returns how many."""
    return conn.execute("UPDATE _minikafka_delivery_leases SET expires_at = ? WHERE owner = ?",
                        (now_ms + ttl_ms, owner)).rowcount


def release_leases_in_current_transaction(conn: sqlite3.Connection, owner: str) -> int:
    """Give up every lease ``owner`` holds (a worker that stops); returns how many."""
    return conn.execute("DELETE FROM _minikafka_delivery_leases WHERE owner = ?", (owner,)).rowcount


# -- the batch in flight -------------------------------------------------------------------
def inflight_batch(conn: sqlite3.Connection, consumer_id: int, partition: int) -> tuple[int, int, int] | None:
    """(first offset, last offset, attempts) of the partition's batch in flight, or None."""
    row = conn.execute("SELECT first_offset, last_offset, attempts FROM _minikafka_inflight WHERE consumer_id = ? "
                       "AND partition = ?", (consumer_id, partition)).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def record_inflight_in_current_transaction(
    conn: sqlite3.Connection, consumer_id: int, partition: int, first: int, last: int, rows: int, now: str,
    *, owner: str | None = None,
) -> bool:
    """Record a new batch as in flight (attempts 0); False (nothing written) when ``owner``
    is given and no longer holds the partition's lease."""
    if owner is not None and not holds_lease(conn, consumer_id, partition, owner):
        return False
    conn.execute("INSERT OR REPLACE INTO _minikafka_inflight (consumer_id, partition, first_offset, last_offset, "
                 "rows, attempts, updated_at) VALUES (?, ?, ?, ?, ?, 0, ?)",
                 (consumer_id, partition, first, last, rows, now))
    return True


def note_failed_attempt_in_current_transaction(
    conn: sqlite3.Connection, consumer_id: int, partition: int, attempts: int, error: str, now: str
) -> None:
    """Count a failed attempt of the batch in flight and keep its (redacted) description."""
    conn.execute("UPDATE _minikafka_inflight SET attempts = ?, last_error = ?, updated_at = ? "
                 "WHERE consumer_id = ? AND partition = ?", (attempts, error, now, consumer_id, partition))


def clear_inflight_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, partition: int) -> None:
    conn.execute("DELETE FROM _minikafka_inflight WHERE consumer_id = ? AND partition = ?", (consumer_id, partition))


def list_inflight(conn: sqlite3.Connection) -> list[dict]:
    """Every batch in flight, with its group, topic and lease holder (the console shows them)."""
    cur = conn.execute(
        "SELECT c.name, c.topic, i.partition, i.first_offset, i.last_offset, i.rows, i.attempts, i.last_error, "
        "i.updated_at, l.owner FROM _minikafka_inflight i JOIN _minikafka_consumers c ON c.id = i.consumer_id "
        "LEFT JOIN _minikafka_delivery_leases l ON l.consumer_id = i.consumer_id AND l.partition = i.partition "
        "ORDER BY c.name, c.topic, i.partition")
    keys = ("group", "topic", "partition", "first_offset", "last_offset", "rows", "attempts", "last_error",
            "updated_at", "lease_owner")
    return [dict(zip(keys, r)) for r in cur.fetchall()]


# -- settling a batch ------------------------------------------------------------------------


def _done_in_current_transaction(conn: sqlite3.Connection, topic: str, consumer_id: int, partition: int,
                                 row_ids: Sequence[int], now: str) -> None:
    """The batch's rows are done for the group: move the offset, or ack them if a row below
    them (or between them) is pending for the group again."""
    committed = acks.committed_offset(conn, consumer_id, partition)
    last = row_ids[-1]
    if last <= committed:
        return
    table = quote_identifier(topic)
    pending = [r[0] for r in conn.execute(
        f'SELECT "_id" FROM {table} WHERE "_partition" = ? AND "_id" > ? AND "_id" <= ? AND {acks.unhandled_sql(topic)} '
        'AND NOT EXISTS (SELECT 1 FROM _minikafka_acks a WHERE a.consumer_id = ? AND a.row_id = "_id") '
        'ORDER BY "_id" LIMIT ?', (partition, committed, last, consumer_id, len(row_ids) + 1))]
    if set(pending) <= set(row_ids):
        acks.commit_offset_in_current_transaction(conn, topic, consumer_id, partition, last, now)
    else:
        acks.ack_many_in_current_transaction(conn, topic, list(row_ids), consumer_id, now,
                                             acks.consumer_ids(conn, topic))


def settle_batch_in_current_transaction(
    conn: sqlite3.Connection, topic: str, consumer_id: int, partition: int, row_ids: Sequence[int], now: str,
    *, owner: str | None = None,
) -> bool:
    """The batch was delivered: its rows are done for the group, nothing is in flight.

    Returns:
        False (nothing written) when ``owner`` is given and no longer holds the lease:
        the worker that holds it now re-sends the batch under the same key.
    """
    if owner is not None and not holds_lease(conn, consumer_id, partition, owner):
        return False
    if row_ids:
        _done_in_current_transaction(conn, topic, consumer_id, partition, row_ids, now)
    clear_inflight_in_current_transaction(conn, consumer_id, partition)
    return True


def quarantine_batch_in_current_transaction(
    conn: sqlite3.Connection, topic: str, group: str, consumer_id: int, partition: int,
    rows: Sequence[tuple[int, str]], reason: str, attempts: int, now: str, *, owner: str | None = None,
) -> bool:
    """The batch failed ``attempts`` times: its rows (row id, payload JSON) go to the
    quarantine (origin ``delivery``, the group as consumer) and are done for the group.

    Returns:
        False (nothing written) when ``owner`` is given and no longer holds the lease.
    """
    if owner is not None and not holds_lease(conn, consumer_id, partition, owner):
        return False
    quarantined.quarantine_in_current_transaction(conn, [
        quarantined.Quarantined(topic, payload, reason, "delivery", now, consumer=group, row_id=row_id,
                                attempts=attempts) for row_id, payload in rows])
    return settle_batch_in_current_transaction(conn, topic, consumer_id, partition, [r[0] for r in rows], now)


def requeue_in_current_transaction(conn: sqlite3.Connection, topic: str, group: str | None, row_id: int | None,
                                   now: str) -> str | None:
    """Make a row the delivery gave up on pending again for its group (it is delivered again,
    before newer rows of its partition once the batch in flight is settled).

    Returns:
        None when done, else why it cannot be requeued (the caller keeps it quarantined).
    """
    if not group or row_id is None:
        return "a delivery failure without its group or row id cannot be requeued"
    consumer_id = acks.find_consumer(conn, topic, group)
    if consumer_id is None:
        return f"delivery group {group!r} is no longer registered on {topic!r}"
    found = conn.execute(f'SELECT "_partition" FROM {quote_identifier(topic)} WHERE "_id" = ?', (row_id,)).fetchone()
    if found is None:
        return f"row {row_id} is no longer in topic {topic!r} (deleted by retention?)"
    acks._reopen(conn, topic, consumer_id, found[0], row_id, row_id, now, count=False)
    return None

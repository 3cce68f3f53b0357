"""The one ack model under every way of consuming a topic: committed offsets plus out-of-order acks.

For each consumer (a Spark stage, a row-level pipe, a consumer group: all are named
consumers in ``_minikafka_consumers``) and each partition of its topic:

- ``_minikafka_offsets.committed``: every row of the partition with ``_id <= committed``
  is done for that consumer. Moving it costs one row update whatever it covers.
- ``_minikafka_acks``: rows the consumer acked *above* its committed offset (out of
  order). As soon as the rows below them are done they fold into the offset and their
  ack rows are deleted, so contiguous progress never leaves a row per message
  (Pulsar's mark-delete position plus individual acks).

Per topic partition, ``_minikafka_partitions.handled_upto`` is the position below which
every registered consumer is done: the minimum of their offsets, never lowered except
by an explicit replay or seek. A row is 'handled' (topic-wide) when ``_status`` says so
or its id is at or below ``handled_upto``. The ``_status`` column is thus the
materialised part of that state: per-row acks keep it exact (their cost already grows
with the rows they ack), while an offset commit and a stage commit only move
positions, so rows they cover may still read ``_status = 'new'`` in raw SQL. Every
reader in this package (``pending_filter``/``done_filter`` with ``topic=``,
``status_of``, ``pending_sql``) applies the positions, so the API, the CLI and Spark all
see the same state. With zero or one consumer and per-row acks, the column alone is
the state, as in minikafka.

All functions here run inside the caller's transaction (they never commit).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable

from ..errors import ConsumerNotFoundError
from .identifiers import quote_identifier, validate_consumer_name

MAX_ID = 2**63 - 1

_NOT_ACKED = 'NOT EXISTS (SELECT 1 FROM _minikafka_acks a WHERE a.consumer_id = ? AND a.row_id = "_id")'


# -- consumers -------------------------------------------------------------------------
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
    count as done for it (its offsets start at each partition's handled position),
    rows still 'new' are pending for it.
    """
    validate_consumer_name(name)
    found = find_consumer(conn, topic, name)
    if found is not None:
        return found
    cur = conn.execute(
        "INSERT INTO _minikafka_consumers (topic, name, created_at) VALUES (?, ?, ?)", (topic, name, now)
    )
    ensure_partitions_in_current_transaction(conn, topic)
    conn.execute(
        "INSERT OR IGNORE INTO _minikafka_offsets (consumer_id, partition, committed, updated_at) "
        "SELECT ?, partition, handled_upto, ? FROM _minikafka_partitions WHERE topic = ?",
        (cur.lastrowid, now, topic),
    )
    return cur.lastrowid


def register_group_in_current_transaction(conn: sqlite3.Connection, topic: str, name: str, now: str) -> int:
    """Register ``name`` as a consumer group on ``topic`` (idempotent) and return its id.

    A consumer group starts at the beginning of the log (offset 0 in every partition,
    as klite's groups do): rows handled before it existed are pending for it, and stay
    done for every other consumer. Registering costs a pass over the topic's handled
    rows, once.
    """
    found = find_consumer(conn, topic, name)
    if found is not None:
        return found
    cid = register_consumer_in_current_transaction(conn, topic, name, now)
    for partition in range(partition_count(conn, topic)):
        _reopen(conn, topic, cid, partition, 1, MAX_ID, now, count=False)
        _set_committed(conn, cid, partition, 0, now)
    return cid


def ensure_partitions_in_current_transaction(conn: sqlite3.Connection, topic: str) -> None:
    """Create the topic's per-partition position rows (idempotent; the catalog gives the count)."""
    n = partition_count(conn, topic)
    conn.executemany(
        "INSERT OR IGNORE INTO _minikafka_partitions (topic, partition, handled_upto) VALUES (?, ?, 0)",
        [(topic, p) for p in range(n)],
    )


def partition_count(conn: sqlite3.Connection, topic: str) -> int:
    row = conn.execute("SELECT partitions FROM _minikafka_topics WHERE name = ?", (topic,)).fetchone()
    return int(row[0]) if row else 1


# -- positions -------------------------------------------------------------------------
def committed_offset(conn: sqlite3.Connection, consumer_id: int, partition: int) -> int:
    """The consumer's committed offset in ``partition`` (0 when nothing is committed)."""
    row = conn.execute(
        "SELECT committed FROM _minikafka_offsets WHERE consumer_id = ? AND partition = ?", (consumer_id, partition)
    ).fetchone()
    return row[0] if row else 0


def committed_offsets(conn: sqlite3.Connection, consumer_id: int) -> dict[int, int]:
    """{partition: committed offset} of one consumer."""
    return dict(conn.execute(
        "SELECT partition, committed FROM _minikafka_offsets WHERE consumer_id = ? ORDER BY partition", (consumer_id,)
    ).fetchall())


def handled_positions(conn: sqlite3.Connection, topic: str) -> dict[int, int]:
    """{partition: handled_upto}: rows at or below it are handled for every consumer."""
    return dict(conn.execute(
        "SELECT partition, handled_upto FROM _minikafka_partitions WHERE topic = ? ORDER BY partition", (topic,)
    ).fetchall())


def status_of(stored_status: str, row_id: int, partition: int, handled: dict[int, int]) -> str:
    """The topic-wide status of a row read raw: its column, or 'handled' below the partition's position."""
    if stored_status == "new" and row_id <= handled.get(partition, 0):
        return "handled"
    return stored_status


def _set_committed(conn, consumer_id: int, partition: int, offset: int, now: str) -> None:
    conn.execute(
        "INSERT INTO _minikafka_offsets (consumer_id, partition, committed, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (consumer_id, partition) DO UPDATE SET committed = excluded.committed, "
        "updated_at = excluded.updated_at",
        (consumer_id, partition, offset, now),
    )


def _handled_upto(conn, topic: str, partition: int) -> int:
    row = conn.execute(
        "SELECT handled_upto FROM _minikafka_partitions WHERE topic = ? AND partition = ?", (topic, partition)
    ).fetchone()
    return row[0] if row else 0


def _set_handled_upto(conn, topic: str, partition: int, position: int) -> None:
    conn.execute(
        "INSERT INTO _minikafka_partitions (topic, partition, handled_upto) VALUES (?, ?, ?) "
        "ON CONFLICT (topic, partition) DO UPDATE SET handled_upto = excluded.handled_upto",
        (topic, partition, position),
    )


def _mark_range_handled(conn, table: str, partition: int, lo: int, hi: int, now: str) -> int:
    """Materialise 'handled' on rows ``lo < _id <= hi`` of a partition."""
    return conn.execute(
        f"UPDATE {table} SET \"_status\" = 'handled', \"_handled_at\" = ? "
        f"WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_id\" <= ? AND \"_status\" = 'new'",
        (now, partition, lo, hi),
    ).rowcount


def _settle(conn, topic: str, partition: int, now: str, *, materialise: bool) -> int:
    """Raise the partition's handled position to the lowest consumer offset; return it.

    ``materialise`` also writes 'handled' into the rows it passes (per-row and stage
    paths); an offset commit leaves them, so its cost stays constant.
    """
    old = _handled_upto(conn, topic, partition)
    low = conn.execute(
        "SELECT min(coalesce(o.committed, 0)), count(*) FROM _minikafka_consumers c LEFT JOIN _minikafka_offsets o "
        "ON o.consumer_id = c.id AND o.partition = ? WHERE c.topic = ?",
        (partition, topic),
    ).fetchone()
    if not low[1] or low[0] is None or low[0] <= old:
        return old
    _set_handled_upto(conn, topic, partition, low[0])
    if materialise:
        _mark_range_handled(conn, quote_identifier(topic), partition, old, low[0], now)
    return low[0]


def _fold(conn, table: str, consumer_id: int, partition: int, start: int) -> int:
    """The highest offset the consumer can commit once every row up to ``start`` is done for it.

    Skips rows above ``start`` that are done anyway ('handled', or acked by it). Cost
    grows with the rows skipped, each skipped once.
    """
    nxt = conn.execute(
        f"SELECT min(\"_id\") FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_status\" = 'new' "
        f"AND {_NOT_ACKED}",
        (partition, start, consumer_id),
    ).fetchone()[0]
    if nxt is not None:
        return nxt - 1
    top = conn.execute(f"SELECT max(\"_id\") FROM {table} WHERE \"_partition\" = ?", (partition,)).fetchone()[0]
    return max(start, top or 0)


def _advance(conn, topic: str, table: str, consumer_id: int, partition: int, upto: int, now: str, *,
             materialise: bool, fold: bool = True) -> int:
    """Set the consumer's offset to ``upto`` (folded over done rows above it); settle the partition."""
    new = _fold(conn, table, consumer_id, partition, upto) if fold else upto
    _set_committed(conn, consumer_id, partition, new, now)
    conn.execute(
        "DELETE FROM _minikafka_acks WHERE consumer_id = ? AND row_id <= ? AND partition = ?",
        (consumer_id, new, partition),
    )
    return _settle(conn, topic, partition, now, materialise=materialise)


def _all_past_sql(table_alias_id: str = '"_id"') -> str:
    # every consumer of the topic (?) is past the row in partition (?): offset or ack
    return (
        "NOT EXISTS (SELECT 1 FROM _minikafka_consumers k WHERE k.topic = ? AND "
        "coalesce((SELECT o.committed FROM _minikafka_offsets o WHERE o.consumer_id = k.id AND o.partition = ?), 0) "
        f"< {table_alias_id} AND NOT EXISTS (SELECT 1 FROM _minikafka_acks a2 WHERE a2.consumer_id = k.id "
        f"AND a2.row_id = {table_alias_id}))"
    )


def _complete_rows(conn, topic: str, table: str, partition: int, row_ids: Iterable[int], now: str) -> int:
    """Rows every consumer is past (by offset or ack) turn 'handled'; their ack rows go."""
    done = 0
    sql = (f"UPDATE {table} SET \"_status\" = 'handled', \"_handled_at\" = ? WHERE \"_id\" = ? "
           f"AND \"_status\" = 'new' AND {_all_past_sql()}")
    for row_id in row_ids:
        if conn.execute(sql, (now, row_id, topic, partition)).rowcount:
            conn.execute("DELETE FROM _minikafka_acks WHERE row_id = ? AND consumer_id IN "
                         "(SELECT id FROM _minikafka_consumers WHERE topic = ?)", (row_id, topic))
            done += 1
    return done


# -- filters ---------------------------------------------------------------------------
def pending_filter(consumer_id: int | None, topic: str | None = None) -> tuple[str, tuple]:
    """SQL condition (on the alias-free topic table) for rows still to do for a consumer.

    With ``consumer_id`` None: rows not yet handled for every consumer; pass ``topic`` so
    that rows below the partitions' handled positions count as handled (without it only
    the ``_status`` column is read). The uncorrelated lower bound lets SQLite start the
    index scan at the lowest position instead of the topic's first row.
    """
    if consumer_id is None:
        if topic is None:
            return "\"_status\" = 'new'", ()
        return (
            "\"_status\" = 'new' AND \"_id\" > (SELECT coalesce(min(handled_upto), 0) FROM _minikafka_partitions "
            "WHERE topic = ?) AND \"_id\" > coalesce((SELECT p.handled_upto FROM _minikafka_partitions p "
            "WHERE p.topic = ? AND p.partition = \"_partition\"), 0)",
            (topic, topic),
        )
    return (
        "\"_status\" = 'new' AND \"_id\" > (SELECT coalesce(min(committed), 0) FROM _minikafka_offsets "
        "WHERE consumer_id = ?) AND \"_id\" > coalesce((SELECT o.committed FROM _minikafka_offsets o "
        f"WHERE o.consumer_id = ? AND o.partition = \"_partition\"), 0) AND {_NOT_ACKED}",
        (consumer_id, consumer_id, consumer_id),
    )


def done_filter(consumer_id: int | None, topic: str | None = None) -> tuple[str, tuple]:
    """SQL condition for rows a consumer (or, with None, every consumer) is done with (see pending_filter)."""
    if consumer_id is None:
        if topic is None:
            return "\"_status\" = 'handled'", ()
        return (
            "(\"_status\" = 'handled' OR \"_id\" <= coalesce((SELECT p.handled_upto FROM _minikafka_partitions p "
            "WHERE p.topic = ? AND p.partition = \"_partition\"), 0))",
            (topic,),
        )
    return (
        "(\"_status\" = 'handled' OR \"_id\" <= coalesce((SELECT o.committed FROM _minikafka_offsets o "
        "WHERE o.consumer_id = ? AND o.partition = \"_partition\"), 0) OR EXISTS (SELECT 1 FROM _minikafka_acks a "
        "WHERE a.consumer_id = ? AND a.row_id = \"_id\"))",
        (consumer_id, consumer_id),
    )


def _positions_sql(positions: dict[int, int], op: str, partitions: Iterable[int]) -> str:
    parts = sorted(set(partitions))
    if list(positions) == [0] and parts == [0]:
        return f"\"_id\" {op} {int(positions[0])}"
    terms = [f"(\"_partition\" = {int(p)} AND \"_id\" {op} {int(positions.get(p, 0))})" for p in parts]
    return "(" + " OR ".join(terms) + ")" if terms else "0"


def pending_sql(conn: sqlite3.Connection, topic: str, consumer_id: int | None,
                partitions: Iterable[int] | None = None) -> str:
    """``pending_filter`` with every value inlined: integers the ledger produced, for JDBC queries.

    ``partitions`` limits the rows to those partitions (default: all).
    """
    n = partition_count(conn, topic)
    parts = list(range(n)) if partitions is None else list(partitions)
    if consumer_id is None:
        positions = handled_positions(conn, topic)
        return f"\"_status\" = 'new' AND {_positions_sql(positions, '>', parts)}"
    positions = committed_offsets(conn, consumer_id)
    return (f"\"_status\" = 'new' AND {_positions_sql(positions, '>', parts)} AND NOT EXISTS (SELECT 1 FROM "
            f"_minikafka_acks a WHERE a.consumer_id = {int(consumer_id)} AND a.row_id = \"_id\")")


def done_sql(conn: sqlite3.Connection, topic: str, consumer_id: int | None,
             partitions: Iterable[int] | None = None) -> str:
    """``done_filter`` with every value inlined (see ``pending_sql``)."""
    n = partition_count(conn, topic)
    parts = list(range(n)) if partitions is None else list(partitions)
    limit = "" if partitions is None else f" AND \"_partition\" IN ({', '.join(str(int(p)) for p in parts) or 'NULL'})"
    if consumer_id is None:
        below = _positions_sql(handled_positions(conn, topic), "<=", parts)
        return f"(\"_status\" = 'handled' OR {below}){limit}"
    below = _positions_sql(committed_offsets(conn, consumer_id), "<=", parts)
    return (f"(\"_status\" = 'handled' OR {below} OR EXISTS (SELECT 1 FROM _minikafka_acks a "
            f"WHERE a.consumer_id = {int(consumer_id)} AND a.row_id = \"_id\")){limit}")


def status_sql(conn: sqlite3.Connection, topic: str) -> str:
    """A SQL expression of the topic-wide status ('new'/'handled') with positions inlined."""
    below = _positions_sql(handled_positions(conn, topic), "<=", range(partition_count(conn, topic)))
    return f"CASE WHEN \"_status\" = 'handled' OR {below} THEN 'handled' ELSE 'new' END"


# -- acking ----------------------------------------------------------------------------
def _mark_handled(conn, table: str, row_id: int, now: str) -> bool:
    cur = conn.execute(
        f"UPDATE {table} SET \"_status\" = 'handled', \"_handled_at\" = ? "
        "WHERE \"_id\" = ? AND \"_status\" = 'new'",
        (now, row_id),
    )
    return cur.rowcount > 0


def _forget_acks(conn, consumers: list[int], row_id: int) -> None:
    if not consumers:
        return
    marks = ", ".join("?" for _ in consumers)
    conn.execute(
        f"DELETE FROM _minikafka_acks WHERE row_id = ? AND consumer_id IN ({marks})", (row_id, *consumers)
    )


def ack_in_current_transaction(
    conn: sqlite3.Connection, topic: str, row_id: int, consumer_id: int | None, now: str,
    consumers: list[int] | None = None,
) -> bool:
    """Ack one row for one consumer (None = for every consumer).

    In offset order this moves the consumer's offset (no ack row); out of order it
    stores an ack row until the rows below are done.

    Returns True if the row turned 'handled' by this ack.
    """
    table = quote_identifier(topic)
    row = conn.execute(f"SELECT \"_status\", \"_partition\" FROM {table} WHERE \"_id\" = ?", (row_id,)).fetchone()
    if row is None or row[0] == "handled":
        return False
    partition = row[1]
    if row_id <= _handled_upto(conn, topic, partition):
        return False
    consumers = consumer_ids(conn, topic) if consumers is None else consumers
    if consumer_id is None:
        changed = _mark_handled(conn, table, row_id, now)
        if changed:
            _forget_acks(conn, consumers, row_id)
        return changed
    committed = committed_offset(conn, consumer_id, partition)
    if row_id <= committed:
        return False
    gap = conn.execute(
        f"SELECT 1 FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_id\" < ? AND \"_status\" = 'new' "
        f"AND {_NOT_ACKED} LIMIT 1",
        (partition, committed, row_id, consumer_id),
    ).fetchone()
    if gap is None:  # the oldest row pending for this consumer: its offset moves
        handled_upto = _advance(conn, topic, table, consumer_id, partition, row_id, now, materialise=True)
        return row_id <= handled_upto
    conn.execute(
        "INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) VALUES (?, ?, ?, ?)",
        (consumer_id, row_id, now, partition),
    )
    return _complete_rows(conn, topic, table, partition, [row_id], now) > 0


def ack_many_in_current_transaction(
    conn: sqlite3.Connection, topic: str, row_ids: list[int], consumer_id: int | None, now: str,
    consumers: list[int],
) -> None:
    """Ack many rows for one consumer (None = every consumer); no per-row result."""
    if not row_ids:
        return
    table = quote_identifier(topic)
    if consumer_id is None:
        conn.executemany(
            f"UPDATE {table} SET \"_status\" = 'handled', \"_handled_at\" = ? "
            "WHERE \"_id\" = ? AND \"_status\" = 'new'",
            [(now, row_id) for row_id in row_ids],
        )
        if consumers:
            marks = ", ".join("?" for _ in consumers)
            conn.executemany(
                f"DELETE FROM _minikafka_acks WHERE row_id = ? AND consumer_id IN ({marks})",
                [(row_id, *consumers) for row_id in row_ids],
            )
        return
    by_partition: dict[int, list[int]] = defaultdict(list)
    if partition_count(conn, topic) == 1:
        by_partition[0] = sorted(row_ids)
    else:
        for lo in range(0, len(row_ids), 500):
            chunk = row_ids[lo:lo + 500]
            marks = ", ".join("?" for _ in chunk)
            for rid, p in conn.execute(
                f"SELECT \"_id\", \"_partition\" FROM {table} WHERE \"_id\" IN ({marks})", chunk
            ):
                by_partition[p].append(rid)
    for partition, ids in by_partition.items():
        ids.sort()
        committed = committed_offset(conn, consumer_id, partition)
        above = [i for i in ids if i > committed]
        if not above:
            continue
        pending = [r[0] for r in conn.execute(
            f"SELECT \"_id\" FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_id\" <= ? "
            f"AND \"_status\" = 'new' AND {_NOT_ACKED} ORDER BY \"_id\" LIMIT ?",
            (partition, committed, above[-1], consumer_id, len(above) + 1),
        )]
        if pending == above:  # exactly the oldest pending rows: the offset moves, no ack rows

            _advance(conn, topic, table, consumer_id, partition, above[-1], now, materialise=True)
            continue
        conn.executemany(
            f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) "
            f"SELECT ?, \"_id\", ?, ? FROM {table} WHERE \"_id\" = ? AND \"_status\" = 'new'",
            [(consumer_id, now, partition, i) for i in above],
        )
        new = _fold(conn, table, consumer_id, partition, committed)
        if new > committed:
            _set_committed(conn, consumer_id, partition, new, now)
            conn.execute("DELETE FROM _minikafka_acks WHERE consumer_id = ? AND row_id <= ? AND partition = ?",
                         (consumer_id, new, partition))
            _settle(conn, topic, partition, now, materialise=True)
        rest = [i for i in above if i > new]
        if rest:
            _complete_rows(conn, topic, table, partition, rest, now)


def ack_upto_in_current_transaction(
    conn: sqlite3.Connection, topic: str, consumer_id: int, upto: int, now: str, *, exclude: bool = False,
    partitions: Iterable[int] | None = None, materialise: bool = True, count: bool = True,
) -> int:
    """Ack every row still pending for a consumer with ``_id <= upto``, set-based.

    ``materialise=False`` (stage commits) moves positions only: rows the partition's
    handled position passes keep ``_status = 'new'`` in raw SQL, as after an offset
    commit, so the cost does not grow with the rows acked.

    With ``exclude``, ids in ``temp.mk_exclude`` are left pending (rows that failed):
    the offset stops below the first of them and the rows acked above it are stored
    as out-of-order acks. ``partitions`` limits the ack to those partitions.
    Returns the number of rows acked for this consumer (0 with ``count=False``, which
    saves a pass over the rows for callers that know the number already).
    """
    table = quote_identifier(topic)
    parts = range(partition_count(conn, topic)) if partitions is None else partitions
    where, params = pending_filter(consumer_id)
    acked = 0
    for partition in parts:
        committed = committed_offset(conn, consumer_id, partition)
        if upto <= committed:
            continue
        acked += 0 if not count else conn.execute(
            f"SELECT count(*) FROM {table} WHERE {where} AND \"_partition\" = ? AND \"_id\" <= ?"
            + (' AND "_id" NOT IN (SELECT id FROM temp.mk_exclude)' if exclude else ""),
            (*params, partition, upto),
        ).fetchone()[0]
        first_failed = None
        if exclude:
            first_failed = conn.execute(
                f"SELECT min(e.id) FROM temp.mk_exclude e JOIN {table} t ON t.\"_id\" = e.id "
                "WHERE t.\"_partition\" = ? AND e.id > ? AND e.id <= ?",
                (partition, committed, upto),
            ).fetchone()[0]
        if first_failed is None:
            _advance(conn, topic, table, consumer_id, partition, upto, now, materialise=materialise)
            continue
        conn.execute(
            f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) "
            f"SELECT ?, \"_id\", ?, ? FROM {table} WHERE {where} AND \"_partition\" = ? AND \"_id\" > ? "
            "AND \"_id\" <= ? AND \"_id\" NOT IN (SELECT id FROM temp.mk_exclude)",
            (consumer_id, now, partition, *params, partition, first_failed, upto),
        )
        if first_failed - 1 > committed:
            _advance(conn, topic, table, consumer_id, partition, first_failed - 1, now, materialise=materialise,
                     fold=False)
        rest = [r[0] for r in conn.execute(
            "SELECT row_id FROM _minikafka_acks WHERE consumer_id = ? AND partition = ? AND row_id > ? "
            "AND row_id <= ?", (consumer_id, partition, first_failed, upto))]
        _complete_rows(conn, topic, table, partition, rest, now)
    return acked


# -- offsets (consumer groups) ---------------------------------------------------------
def commit_offset_in_current_transaction(
    conn: sqlite3.Connection, topic: str, consumer_id: int, partition: int, offset: int, now: str
) -> bool:
    """Everything up to and including ``offset`` in ``partition`` is done for the consumer.

    Constant cost, whatever the offset covers: one offset row, the partition's handled
    position, and the consumer's out-of-order acks at or below it (none when it
    consumes in order). Monotonic: an offset at or below the committed one changes
    nothing and returns False.
    """
    committed = committed_offset(conn, consumer_id, partition)
    if offset <= committed:
        return False
    table = quote_identifier(topic)
    acked_above = conn.execute(
        "SELECT 1 FROM _minikafka_acks WHERE consumer_id = ? AND row_id > ? AND partition = ? LIMIT 1",
        (consumer_id, offset, partition),
    ).fetchone()
    _advance(conn, topic, table, consumer_id, partition, offset, now, materialise=False, fold=acked_above is not None)
    return True


def seek_in_current_transaction(
    conn: sqlite3.Connection, topic: str, consumer_id: int, partition: int, offset: int, now: str
) -> None:
    """Set the consumer's offset in ``partition`` to exactly ``offset``, backwards or forwards.

    Rows up to ``offset`` count as done for it; every row above is pending for it
    again (its out-of-order acks there are dropped, rows handled topic-wide reopen for
    it alone). Cost grows with the rows reopened.
    """
    _reopen(conn, topic, consumer_id, partition, offset + 1, MAX_ID, now, count=False)
    if offset > committed_offset(conn, consumer_id, partition):
        _advance(conn, topic, quote_identifier(topic), consumer_id, partition, offset, now,
                 materialise=False, fold=False)


def lag(conn: sqlite3.Connection, topic: str, consumer_id: int | None) -> dict[int, int]:
    """{partition: rows pending for the consumer}; cost grows with the lag.

    ``consumer_id`` None: for a group not registered yet (every row of the partition).
    """
    table = quote_identifier(topic)
    if consumer_id is None:  # a group not registered yet: it would start at the log's beginning
        offsets, extra, params = {}, "", ()
    else:
        offsets, extra, params = committed_offsets(conn, consumer_id), f" AND {_NOT_ACKED}", (consumer_id,)
    out = {}
    for partition in range(partition_count(conn, topic)):
        out[partition] = conn.execute(
            f"SELECT count(*) FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ?"
            + (f" AND \"_status\" = 'new'{extra}" if consumer_id is not None else ""),
            (partition, offsets.get(partition, 0), *params),
        ).fetchone()[0]
    return out


# -- replay and drop -------------------------------------------------------------------
def _reopen(conn, topic: str, consumer_id: int, partition: int, lo: int, hi: int, now: str, *, count: bool) -> int:
    """Make rows ``lo <= _id <= hi`` of one partition pending again for one consumer."""
    table = quote_identifier(topic)
    committed = committed_offset(conn, consumer_id, partition)
    handled_upto = _handled_upto(conn, topic, partition)
    reopened = 0
    if count:
        reopened = conn.execute(
            f"SELECT count(*) FROM {table} WHERE \"_partition\" = ? AND \"_id\" BETWEEN ? AND ? AND "
            f"(\"_id\" <= ? OR \"_status\" = 'handled' OR NOT {_NOT_ACKED})",
            (partition, lo, hi, committed, consumer_id),
        ).fetchone()[0]
    others = [c for c in consumer_ids(conn, topic) if c != consumer_id]
    for other in others:  # rows handled for everyone stay done for the others, as acks
        conn.execute(
            f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) "
            f"SELECT ?, \"_id\", ?, ? FROM {table} WHERE \"_partition\" = ? AND \"_status\" = 'handled' "
            f"AND \"_id\" BETWEEN ? AND ? AND \"_id\" > ?",
            (other, now, partition, partition, max(lo, handled_upto + 1), hi, committed_offset(conn, other, partition)),
        )
    new_position = max(0, lo - 1)
    if committed >= lo:
        if hi < handled_upto:  # done for everyone above the range: keep it so once the position drops
            _mark_range_handled(conn, table, partition, hi, handled_upto, now)
        if hi < committed:  # done for this consumer above the range: keep it as acks
            conn.execute(
                f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) "
                f"SELECT ?, \"_id\", ?, ? FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_id\" <= ? "
                "AND \"_status\" = 'new'",
                (consumer_id, now, partition, partition, max(hi, handled_upto), committed),
            )
        _set_committed(conn, consumer_id, partition, new_position, now)
    if handled_upto >= lo:
        _set_handled_upto(conn, topic, partition, new_position)
    conn.execute(
        f"UPDATE {table} SET \"_status\" = 'new', \"_handled_at\" = NULL "
        f"WHERE \"_partition\" = ? AND \"_status\" = 'handled' AND \"_id\" BETWEEN ? AND ?",
        (partition, lo, hi),
    )
    conn.execute(
        "DELETE FROM _minikafka_acks WHERE consumer_id = ? AND row_id BETWEEN ? AND ? AND partition = ?",
        (consumer_id, lo, hi, partition),
    )
    return reopened


def replay_in_current_transaction(
    conn: sqlite3.Connection, topic: str, consumer_id: int, lo: int, hi: int, now: str
) -> int:
    """Make rows with ``lo <= _id <= hi`` pending again for one consumer.

    Every other consumer keeps its state (rows handled for everyone stay done for the
    others). Returns the number of rows made pending for that consumer.
    """
    reopened = 0
    for partition in range(partition_count(conn, topic)):
        reopened += _reopen(conn, topic, consumer_id, partition, lo, hi, now, count=True)
    conn.execute(
        "DELETE FROM _minikafka_attempts WHERE consumer_id = ? AND row_id BETWEEN ? AND ?",
        (consumer_id, lo, hi),
    )
    return reopened


def drop_consumer_in_current_transaction(conn: sqlite3.Connection, topic: str, consumer_id: int, now: str) -> int:
    """Unregister a consumer; rows now done for every remaining consumer turn 'handled'.

    Returns the number of rows that turned handled.
    """
    conn.execute("DELETE FROM _minikafka_consumers WHERE id = ?", (consumer_id,))
    remaining = consumer_ids(conn, topic)
    if not remaining:
        return 0
    table = quote_identifier(topic)
    done = 0
    for partition in range(partition_count(conn, topic)):
        old = _handled_upto(conn, topic, partition)
        new = _settle(conn, topic, partition, now, materialise=False)
        if new > old:
            done += conn.execute(
                f"SELECT count(*) FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_id\" <= ? "
                "AND \"_status\" = 'new'", (partition, old, new)).fetchone()[0]
        marks = ", ".join("?" for _ in remaining)
        candidates = [r[0] for r in conn.execute(
            f"SELECT DISTINCT row_id FROM _minikafka_acks WHERE consumer_id IN ({marks}) AND partition = ? "
            "AND row_id > ? ORDER BY row_id", (*remaining, partition, new))]
        done += _complete_rows(conn, topic, table, partition, candidates, now)
    return done

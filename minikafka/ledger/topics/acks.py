"""The one ack model under every way of consuming a topic: positions plus out-of-order acks.

For each consumer (a Spark stage, a row-level pipe, a consumer group, a queue, a stream:
all are named consumers in ``_minikafka_consumers``) and each partition of its topic:

- ``_minikafka_offsets.committed``: every row of the partition with ``_id <= committed``
  is done for that consumer. Moving it costs one row update whatever it covers.
- ``_minikafka_acks``: rows the consumer acked *above* its committed offset (out of
  order). As soon as the rows below them are done they fold into the offset and their
  ack rows are deleted, so contiguous progress never leaves a row per message
  (Pulsar's mark-delete position plus individual acks).

A topic-wide ack (``set_handled`` without a consumer, rows appended as handled) marks a
row handled for every consumer, present and future, the same way: per topic partition a
position, ``_minikafka_partitions.handled_upto``, and the rows above it in
``_minikafka_handled``. That is the whole state: topic tables hold no status column, and
every reader, inside the package or outside it (the topic's status views), derives the
status from these tables with the expressions in status.py. Every commit therefore costs
the same whatever it covers, and nothing a reader sees can lag behind it.

A new consumer starts where its ``start`` says (Kafka's ``auto.offset.reset``): ``earliest``
(the default: every row of the topic is pending for it, except rows handled for every
consumer by a topic-wide ack) or ``latest`` (only rows appended after it registered).
An existing consumer keeps its position whatever ``start`` says.

All functions here run inside the caller's transaction (they never commit).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from ...errors import ConsumerNotFoundError, InvalidSettingError
from . import counts, status
from .identifiers import quote_identifier, validate_consumer_name

MAX_ID = 2**63 - 1
STARTS = ("earliest", "latest")

_ACKED = 'EXISTS (SELECT 1 FROM _minikafka_acks a WHERE a.consumer_id = ? AND a.row_id = "_id")'
_MARKED = 'EXISTS (SELECT 1 FROM _minikafka_handled h WHERE h.topic = ? AND h.row_id = "_id")'


# -- consumers -------------------------------------------------------------------------
def consumer_ids(conn: sqlite3.Connection, topic: str) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT id FROM _minikafka_consumers WHERE topic = ? ORDER BY id", (topic,)
    )]


def consumer_names(conn: sqlite3.Connection, topic: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT name FROM _minikafka_consumers WHERE topic = ? ORDER BY id", (topic,)
    )]


def topics_of_consumer(conn: sqlite3.Connection, name: str) -> list[str]:
    """The topics a consumer of this name is registered on, sorted (a stage's inputs)."""
    return [r[0] for r in conn.execute(
        "SELECT topic FROM _minikafka_consumers WHERE name = ? ORDER BY topic", (name,)
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


def check_start(start: object) -> str:
    """``start`` if it is 'earliest' or 'latest'.

    Raises:
        InvalidSettingError: anything else, named in the message.
    """
    if start not in STARTS:
        raise InvalidSettingError(
            f"start must be 'earliest' (every row of the topic) or 'latest' (only rows appended from now on), "
            f"got {start!r}")
    return start  # type: ignore[return-value]


@dataclass
class Registration:
    """Where a consumer stands on a topic after registering it.

    ``created``: registered just now (False: it existed, ``start`` did not apply).
    ``offsets``: its committed offset per partition. ``skipped``: rows that existed when it
    was created and that it will never see (``start='latest'``; 0 otherwise).
    """

    topic: str
    name: str
    consumer_id: int
    created: bool
    start: str
    offsets: dict[int, int] = field(default_factory=dict)
    skipped: int = 0

    def note(self, who: str | None = None) -> str | None:
        """A line saying that the consumer starts past rows that exist, or None."""
        if not (self.created and self.skipped):
            return None
        at = (f"offset {self.offsets.get(0, 0)}" if list(self.offsets) == [0] else
              "offsets " + ", ".join(f"{p}:{o}" for p, o in sorted(self.offsets.items())))
        return (f"{who or 'consumer ' + repr(self.name)}: consumer starts at {at} of topic {self.topic!r}, "
                f"{self.skipped} earlier row{'s are' if self.skipped != 1 else ' is'} skipped (start={self.start})")


def start_offsets(conn: sqlite3.Connection, topic: str, start: str = "earliest") -> dict[int, int]:
    """{partition: offset} where a consumer registered now with ``start`` begins.

    earliest: the partition's handled position (rows below it are handled for every
    consumer anyway). latest: the partition's last row.
    """
    check_start(start)
    positions = handled_positions(conn, topic)
    offsets = {p: positions.get(p, 0) for p in range(partition_count(conn, topic))}
    if start == "latest":
        table = quote_identifier(topic)
        for p in offsets:
            top = conn.execute(f'SELECT max("_id") FROM {table} WHERE "_partition" = ?', (p,)).fetchone()[0]
            offsets[p] = max(offsets[p], top or 0)
    return offsets


def rows_skipped(conn: sqlite3.Connection, topic: str, offsets: dict[int, int]) -> int:
    """Rows at or below ``offsets`` that are not handled for every consumer: what a consumer
    starting there never sees. Cost grows with those rows (counted once, at registration)."""
    table = quote_identifier(topic)
    positions = handled_positions(conn, topic)
    return sum(conn.execute(
        f'SELECT count(*) FROM {table} WHERE "_partition" = ? AND "_id" > ? AND "_id" <= ? AND NOT {_MARKED}',
        (p, positions.get(p, 0), offset, topic)).fetchone()[0]
        for p, offset in offsets.items() if offset > positions.get(p, 0))


def register_in_current_transaction(
    conn: sqlite3.Connection, topic: str, name: str, now: str, *, start: str = "earliest"
) -> Registration:
    """Register ``name`` on ``topic`` (idempotent); say where it starts.

    Raises:
        InvalidNameError: a bad consumer name.
        InvalidSettingError: ``start`` is not 'earliest' or 'latest'.
    """
    validate_consumer_name(name)
    check_start(start)
    found = find_consumer(conn, topic, name)
    if found is not None:
        return Registration(topic, name, found, False, start, committed_offsets(conn, found))
    ensure_partitions_in_current_transaction(conn, topic)
    offsets = start_offsets(conn, topic, start)
    cur = conn.execute(
        "INSERT INTO _minikafka_consumers (topic, name, created_at) VALUES (?, ?, ?)", (topic, name, now)
    )
    conn.executemany(
        "INSERT OR IGNORE INTO _minikafka_offsets (consumer_id, partition, committed, updated_at) VALUES (?, ?, ?, ?)",
        [(cur.lastrowid, p, offset, now) for p, offset in offsets.items()],
    )
    skipped = rows_skipped(conn, topic, offsets) if start == "latest" else 0
    return Registration(topic, name, cur.lastrowid, True, start, offsets, skipped)


def planned_registration(conn: sqlite3.Connection, topic: str, name: str, *, start: str = "earliest") -> Registration:
    """What ``register_in_current_transaction`` would do now, without writing anything."""
    check_start(start)
    found = find_consumer(conn, topic, name)
    if found is not None:
        return Registration(topic, name, found, False, start, committed_offsets(conn, found))
    offsets = start_offsets(conn, topic, start)
    skipped = rows_skipped(conn, topic, offsets) if start == "latest" else 0
    return Registration(topic, name, 0, True, start, offsets, skipped)


def register_consumer_in_current_transaction(
    conn: sqlite3.Connection, topic: str, name: str, now: str, *, start: str = "earliest"
) -> int:
    """Register ``name`` on ``topic`` (idempotent) and return its id.

    A new consumer starts at ``start``: 'earliest' (every row is pending for it except rows
    handled for every consumer) or 'latest' (rows appended from now on). An existing one
    keeps its position.
    """
    return register_in_current_transaction(conn, topic, name, now, start=start).consumer_id


def register_group_in_current_transaction(conn: sqlite3.Connection, topic: str, name: str, now: str, *,
                                          start: str = "earliest") -> int:
    """Register ``name`` as a consumer group on ``topic`` (idempotent) and return its id.

    A group is a consumer like any other: the same start rule applies.
    """
    return register_consumer_in_current_transaction(conn, topic, name, now, start=start)


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
    """{partition: handled_upto}: rows at or below it are handled for every consumer (topic-wide acks)."""
    return dict(conn.execute(
        "SELECT partition, handled_upto FROM _minikafka_partitions WHERE topic = ? ORDER BY partition", (topic,)
    ).fetchall())


def status_of(stored_status: str | None, row_id: int, partition: int, handled: dict[int, int]) -> str:
    """The topic-wide status of a row read with ``TopicLayout.select_sql`` (which computes it).

    A status slot without a value (a read that does not compute it) falls back to the
    partitions' handled positions.
    """
    if stored_status is not None:
        return stored_status
    return "handled" if row_id <= handled.get(partition, 0) else "new"


_SET_COMMITTED = (
    "INSERT INTO _minikafka_offsets (consumer_id, partition, committed, updated_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (consumer_id, partition) DO UPDATE SET committed = excluded.committed, updated_at = excluded.updated_at")
_SET_HANDLED_UPTO = (
    "INSERT INTO _minikafka_partitions (topic, partition, handled_upto, updated_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (topic, partition) DO UPDATE SET handled_upto = excluded.handled_upto, updated_at = excluded.updated_at")


def _set_committed(conn, consumer_id: int, partition: int, offset: int, now: str) -> None:
    conn.execute(_SET_COMMITTED, (consumer_id, partition, offset, now))


def _handled_upto(conn, topic: str, partition: int) -> int:
    row = conn.execute(
        "SELECT handled_upto FROM _minikafka_partitions WHERE topic = ? AND partition = ?", (topic, partition)
    ).fetchone()
    return row[0] if row else 0


def _set_handled_upto(conn, topic: str, partition: int, position: int, now: str) -> None:
    conn.execute(_SET_HANDLED_UPTO, (topic, partition, position, now))


def _is_marked(conn, topic: str, row_id: int) -> bool:
    return conn.execute("SELECT 1 FROM _minikafka_handled WHERE topic = ? AND row_id = ?",
                        (topic, row_id)).fetchone() is not None


def _explicit(conn, topic: str, partition: int, row_id: int) -> bool:
    """Whether the row is handled for every consumer by a topic-wide ack."""
    return row_id <= _handled_upto(conn, topic, partition) or _is_marked(conn, topic, row_id)


def _all_past(conn, topic: str, partition: int, row_id: int) -> bool:
    """Whether at least one consumer is registered and every one is past the row (status.ALL_PAST)."""
    return bool(conn.execute(
        "SELECT EXISTS (SELECT 1 FROM _minikafka_consumers k WHERE k.topic = ?) AND NOT EXISTS (SELECT 1 FROM "
        "_minikafka_consumers k WHERE k.topic = ? AND coalesce((SELECT o.committed FROM _minikafka_offsets o "
        "WHERE o.consumer_id = k.id AND o.partition = ?), 0) < ? AND NOT EXISTS (SELECT 1 FROM _minikafka_acks a "
        "WHERE a.consumer_id = k.id AND a.row_id = ?))",
        (topic, topic, partition, row_id, row_id)).fetchone()[0])


def _fold_handled(conn, topic: str, table: str, partition: int, now: str) -> int:
    """Raise the partition's handled position over the rows above it handled out of order; return it.

    Cost grows with the marked rows it passes, each passed once (their marks are deleted).
    """
    old = _handled_upto(conn, topic, partition)
    nxt = conn.execute(
        f'SELECT min("_id") FROM {table} WHERE "_partition" = ? AND "_id" > ? AND NOT {_MARKED}',
        (partition, old, topic),
    ).fetchone()[0]
    if nxt is None:
        top = conn.execute(f'SELECT max("_id") FROM {table} WHERE "_partition" = ?', (partition,)).fetchone()[0]
        new = max(old, top or 0)
    else:
        new = nxt - 1
    if new > old:
        _set_handled_upto(conn, topic, partition, new, now)
        conn.execute("DELETE FROM _minikafka_handled WHERE topic = ? AND row_id <= ? AND partition = ?",
                     (topic, new, partition))
    return new


def _mark_handled(conn, topic: str, table: str, partition: int, row_ids: list[int], now: str) -> None:
    """Mark rows of one partition handled for every consumer; fold the position over them."""
    position = _handled_upto(conn, topic, partition)
    row_ids = sorted(i for i in row_ids if i > position)
    if not row_ids:
        return
    first = conn.execute(
        f'SELECT "_id" FROM {table} WHERE "_partition" = ? AND "_id" > ? AND NOT {_MARKED} ORDER BY "_id" LIMIT ?',
        (partition, position, topic, len(row_ids)),
    ).fetchall()
    if [r[0] for r in first] == row_ids:  # exactly the oldest rows not yet handled: the position moves
        _set_handled_upto(conn, topic, partition, row_ids[-1], now)
    else:
        conn.executemany(
            f"INSERT OR IGNORE INTO _minikafka_handled (topic, row_id, partition, handled_at) "
            f"SELECT ?, \"_id\", \"_partition\", ? FROM {table} WHERE \"_id\" = ?",
            [(topic, now, i) for i in row_ids],
        )
    _fold_handled(conn, topic, table, partition, now)


def mark_appended_handled_in_current_transaction(conn: sqlite3.Connection, topic: str, after: int, now: str) -> None:
    """Mark every row with ``_id > after`` handled for every consumer (rows just appended as history).

    When every row up to ``after`` is handled already (a backfill of history into a topic
    that holds only history) this moves the positions: constant cost.
    """
    table = quote_identifier(topic)
    for partition in range(partition_count(conn, topic)):
        position = _fold_handled(conn, topic, table, partition, now)
        gap = conn.execute(
            f'SELECT 1 FROM {table} WHERE "_partition" = ? AND "_id" > ? AND "_id" <= ? AND NOT {_MARKED} LIMIT 1',
            (partition, position, after, topic),
        ).fetchone()
        if gap is None:
            top = conn.execute(f'SELECT max("_id") FROM {table} WHERE "_partition" = ?', (partition,)).fetchone()[0]
            if (top or 0) > position:
                _set_handled_upto(conn, topic, partition, top, now)
                conn.execute("DELETE FROM _minikafka_handled WHERE topic = ? AND row_id <= ? AND partition = ?",
                             (topic, top, partition))
            continue
        conn.execute(
            f"INSERT OR IGNORE INTO _minikafka_handled (topic, row_id, partition, handled_at) "
            f"SELECT ?, \"_id\", \"_partition\", ? FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ?",
            (topic, now, partition, after),
        )


def _fold(conn, topic: str, table: str, consumer_id: int, partition: int, start: int) -> int:
    """The highest offset the consumer can commit once every row up to ``start`` is done for it.

    Skips rows above ``start`` that are done anyway (acked by it, or handled for everyone).
    Cost grows with the rows skipped, each skipped once.
    """
    low = max(start, _handled_upto(conn, topic, partition))
    nxt = conn.execute(
        f"SELECT min(\"_id\") FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? AND NOT {_ACKED} "
        f"AND NOT {_MARKED}",
        (partition, low, consumer_id, topic),
    ).fetchone()[0]
    if nxt is not None:
        return nxt - 1
    top = conn.execute(f"SELECT max(\"_id\") FROM {table} WHERE \"_partition\" = ?", (partition,)).fetchone()[0]
    return max(low, top or 0)


def _advance(conn, topic: str, table: str, consumer_id: int, partition: int, upto: int, now: str, *,
             fold: bool = True) -> int:
    """Set the consumer's offset to ``upto`` (folded over rows done for it above it); return it."""
    new = _fold(conn, topic, table, consumer_id, partition, upto) if fold else upto
    _set_committed(conn, consumer_id, partition, new, now)
    conn.execute(
        "DELETE FROM _minikafka_acks WHERE consumer_id = ? AND row_id <= ? AND partition = ?",
        (consumer_id, new, partition),
    )
    return new


def _forget_acks(conn, consumers: list[int], row_ids: list[int]) -> None:
    """Drop the per-consumer acks of rows now handled for everyone (they say nothing more)."""
    if not consumers or not row_ids:
        return
    marks = ", ".join("?" for _ in consumers)
    conn.executemany(
        f"DELETE FROM _minikafka_acks WHERE row_id = ? AND consumer_id IN ({marks})",
        [(row_id, *consumers) for row_id in row_ids],
    )


# -- filters ---------------------------------------------------------------------------
def pending_filter(consumer_id: int | None, topic: str | None = None) -> tuple[str, tuple]:
    """SQL condition (on the alias-free topic table) for rows still to do for a consumer.

    With ``consumer_id`` None: rows not handled topic-wide (``topic`` is then required).
    The uncorrelated lower bound lets SQLite start its rowid range at the lowest position
    instead of the topic's first row.

    Raises:
        ValueError: neither a consumer nor a topic.
    """
    if consumer_id is None:
        if topic is None:
            raise ValueError("pending_filter needs a consumer id or a topic")
        return status.bind(f'"_id" > {status.LOWEST_PENDING} AND NOT {status.HANDLED}', topic)
    return status.bind(f'"_id" > {status.LOWEST_PENDING_FOR} AND NOT {status.DONE_FOR}', topic, consumer_id)


def done_filter(consumer_id: int | None, topic: str | None = None) -> tuple[str, tuple]:
    """SQL condition for rows a consumer (or, with None, every consumer) is done with (see pending_filter)."""
    if consumer_id is None:
        if topic is None:
            raise ValueError("done_filter needs a consumer id or a topic")
        return status.bind(status.HANDLED, topic)
    return status.bind(status.DONE_FOR, topic, consumer_id)


def status_column(consumer_id: int) -> tuple[str, tuple]:
    """A select column reading 'handled' or 'new' as one consumer sees each row, and its parameters."""
    done, params = done_filter(consumer_id)
    return f"CASE WHEN {done} THEN 'handled' ELSE 'new' END", params


def unhandled_sql(topic: str) -> str:
    """SQL condition: the row is not handled for every consumer by a topic-wide ack (no parameters).

    What a consumer reading above its committed offset skips besides its own acks.
    """
    return f"NOT {status.render(status.EXPLICIT, topic)}"


def _positions_sql(positions: dict[int, int], op: str, partitions: Iterable[int]) -> str:
    """``"_id" op position`` per partition of ``partitions`` (``positions`` holds every partition
    of the topic: one key 0 means a topic with one partition)."""
    parts = sorted(set(partitions))
    if list(positions) == [0] and parts == [0]:
        return f"\"_id\" {op} {int(positions[0])}"
    terms = [f"(\"_partition\" = {int(p)} AND \"_id\" {op} {int(positions.get(p, 0))})" for p in parts]
    return "(" + " OR ".join(terms) + ")" if terms else "0"


def pending_sql(conn: sqlite3.Connection, topic: str, consumer_id: int | None,
                partitions: Iterable[int] | None = None) -> str:
    """``pending_filter`` with every value inlined (positions as of now), for JDBC queries.

    Only integers the ledger produced and the (validated) topic name reach the SQL text.
    ``partitions`` limits the rows to those partitions (default: all).
    """
    n = partition_count(conn, topic)
    parts = list(range(n)) if partitions is None else list(partitions)
    handled = handled_positions(conn, topic)
    marked = f"NOT EXISTS (SELECT 1 FROM _minikafka_handled h WHERE h.topic = {status.topic_literal(topic)} " \
             "AND h.row_id = \"_id\")"
    if consumer_id is None:
        return f"{_positions_sql(handled, '>', parts)} AND {marked} AND NOT {status.render(status.ALL_PAST, topic)}"
    offsets = committed_offsets(conn, consumer_id)
    above = {p: max(offsets.get(p, 0), handled.get(p, 0)) for p in range(n)}
    lowest = min((above[p] for p in parts), default=0)
    # the per-row lookups only where marks exist: with no out-of-order mark or ack above
    # the positions (a stage's usual case) the condition is a plain id range
    terms = [_positions_sql(above, '>', parts)]
    if _has_marks_above(conn, topic, lowest):
        terms.append(marked)
    if _has_acks_above(conn, consumer_id, lowest):
        terms.append(f"NOT EXISTS (SELECT 1 FROM _minikafka_acks a WHERE a.consumer_id = {int(consumer_id)} "
                     "AND a.row_id = \"_id\")")
    return " AND ".join(terms)


def _has_marks_above(conn: sqlite3.Connection, topic: str, row_id: int) -> bool:
    return conn.execute("SELECT 1 FROM _minikafka_handled WHERE topic = ? AND row_id > ? LIMIT 1",
                        (topic, row_id)).fetchone() is not None


def _has_acks_above(conn: sqlite3.Connection, consumer_id: int, row_id: int) -> bool:
    return conn.execute("SELECT 1 FROM _minikafka_acks WHERE consumer_id = ? AND row_id > ? LIMIT 1",
                        (consumer_id, row_id)).fetchone() is not None


def count_pending(conn: sqlite3.Connection, topic: str, consumer_id: int, upto: int,
                  partitions: Iterable[int] | None = None) -> int:
    """Rows of ``topic`` pending for the consumer with ids up to ``upto`` (positions as of
    now), from positions and row marks (counts.py): the cost does not grow with them."""
    return sum(counts.pending_counts(conn, topic, consumer_id, int(upto), partitions).values())


def pending_sql_for_new(conn: sqlite3.Connection, topic: str, start: str,
                        partitions: Iterable[int] | None = None) -> str:
    """``pending_sql`` for a consumer not registered yet that would start at ``start``."""
    n = partition_count(conn, topic)
    parts = list(range(n)) if partitions is None else list(partitions)
    return (f"{_positions_sql(start_offsets(conn, topic, start), '>', parts)} AND NOT EXISTS (SELECT 1 FROM "
            f"_minikafka_handled h WHERE h.topic = {status.topic_literal(topic)} AND h.row_id = \"_id\")")


def done_sql(conn: sqlite3.Connection, topic: str, consumer_id: int | None,
             partitions: Iterable[int] | None = None) -> str:
    """``done_filter`` with every value inlined (see ``pending_sql``)."""
    n = partition_count(conn, topic)
    parts = list(range(n)) if partitions is None else list(partitions)
    limit = "" if partitions is None else f" AND \"_partition\" IN ({', '.join(str(int(p)) for p in parts) or 'NULL'})"
    if consumer_id is None:
        return f"{status.render(status.HANDLED, topic)}{limit}"
    return f"{status.render(status.DONE_FOR, topic, int(consumer_id))}{limit}"


def status_sql(conn: sqlite3.Connection, topic: str) -> str:
    """A SQL expression of the topic-wide status ('new'/'handled') of a row of ``topic``."""
    partition = "0" if partition_count(conn, topic) == 1 else '"_partition"'
    return status.render(status.STATUS, topic, partition=partition)


# -- acking ----------------------------------------------------------------------------
def ack_in_current_transaction(
    conn: sqlite3.Connection, topic: str, row_id: int, consumer_id: int | None, now: str,
    consumers: list[int] | None = None,
) -> bool:
    """Ack one row for one consumer (None = for every consumer, present and future).

    In offset order this moves the consumer's offset (no ack row); out of order it
    stores an ack row until the rows below are done.

    Returns True if the row turned 'handled' (topic-wide) by this ack.
    """
    table = quote_identifier(topic)
    row = conn.execute(f"SELECT \"_partition\" FROM {table} WHERE \"_id\" = ?", (row_id,)).fetchone()
    if row is None:
        return False
    partition = row[0]
    if _explicit(conn, topic, partition, row_id):
        return False
    consumers = consumer_ids(conn, topic) if consumers is None else consumers
    if consumer_id is None:
        if consumers and _all_past(conn, topic, partition, row_id):
            return False
        _mark_handled(conn, topic, table, partition, [row_id], now)
        _forget_acks(conn, consumers, [row_id])
        return True
    committed = committed_offset(conn, consumer_id, partition)
    if row_id <= committed or conn.execute(
            "SELECT 1 FROM _minikafka_acks WHERE consumer_id = ? AND row_id = ?", (consumer_id, row_id)).fetchone():
        return False
    gap = conn.execute(
        f"SELECT 1 FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_id\" < ? AND NOT {_ACKED} "
        f"AND NOT {_MARKED} LIMIT 1",
        (partition, max(committed, _handled_upto(conn, topic, partition)), row_id, consumer_id, topic),
    ).fetchone()
    if gap is None:  # the oldest row pending for this consumer: its offset moves
        _advance(conn, topic, table, consumer_id, partition, row_id, now)
    else:
        conn.execute(
            "INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) VALUES (?, ?, ?, ?)",
            (consumer_id, row_id, now, partition),
        )
    return _all_past(conn, topic, partition, row_id)


def _by_partition(conn, topic: str, table: str, row_ids: list[int]) -> dict[int, list[int]]:
    by_partition: dict[int, list[int]] = defaultdict(list)
    if partition_count(conn, topic) == 1:
        by_partition[0] = sorted(row_ids)
        return by_partition
    for lo in range(0, len(row_ids), 500):
        chunk = row_ids[lo:lo + 500]
        marks = ", ".join("?" for _ in chunk)
        for rid, p in conn.execute(f"SELECT \"_id\", \"_partition\" FROM {table} WHERE \"_id\" IN ({marks})", chunk):
            by_partition[p].append(rid)
    for ids in by_partition.values():
        ids.sort()
    return by_partition


def ack_many_in_current_transaction(
    conn: sqlite3.Connection, topic: str, row_ids: list[int], consumer_id: int | None, now: str,
    consumers: list[int],
) -> None:
    """Ack many rows for one consumer (None = every consumer); no per-row result."""
    if not row_ids:
        return
    table = quote_identifier(topic)
    by_partition = _by_partition(conn, topic, table, row_ids)
    if consumer_id is None:
        for partition, ids in by_partition.items():
            _mark_handled(conn, topic, table, partition, ids, now)
        _forget_acks(conn, consumers, row_ids)
        return
    for partition, ids in by_partition.items():
        committed = committed_offset(conn, consumer_id, partition)
        above = [i for i in ids if i > committed]
        if not above:
            continue
        low = max(committed, _handled_upto(conn, topic, partition))
        pending = [r[0] for r in conn.execute(
            f"SELECT \"_id\" FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_id\" <= ? "
            f"AND NOT {_ACKED} AND NOT {_MARKED} ORDER BY \"_id\" LIMIT ?",
            (partition, low, above[-1], consumer_id, topic, len(above) + 1),
        )]
        if pending == above:  # exactly the oldest pending rows: the offset moves, no ack rows
            _advance(conn, topic, table, consumer_id, partition, above[-1], now)
            continue
        conn.executemany(
            f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) "
            f"SELECT ?, \"_id\", ?, ? FROM {table} WHERE \"_id\" = ? AND \"_id\" > ? AND NOT {_MARKED}",
            [(consumer_id, now, partition, i, low, topic) for i in above],
        )
        new = _fold(conn, topic, table, consumer_id, partition, committed)
        if new > committed:
            _set_committed(conn, consumer_id, partition, new, now)
            conn.execute("DELETE FROM _minikafka_acks WHERE consumer_id = ? AND row_id <= ? AND partition = ?",
                         (consumer_id, new, partition))


def ack_upto_in_current_transaction(
    conn: sqlite3.Connection, topic: str, consumer_id: int, upto: int, now: str, *, exclude: bool = False,
    partitions: Iterable[int] | None = None, count: bool = True,
) -> int:
    """Ack every row still pending for a consumer with ``_id <= upto``, set-based.

    Moves the consumer's offset (one row per partition): the cost does not grow with the
    rows acked.

    With ``exclude``, ids in ``temp.mk_exclude`` are left pending (rows that failed):
    the offset stops below the first of them and the rows acked above it are stored
    as out-of-order acks. ``partitions`` limits the ack to those partitions.
    Returns the number of rows acked for this consumer (0 with ``count=False``, which
    saves a pass over the rows for callers that know the number already).
    """
    table = quote_identifier(topic)
    parts = range(partition_count(conn, topic)) if partitions is None else partitions
    where, params = pending_filter(consumer_id, topic)
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
            _advance(conn, topic, table, consumer_id, partition, upto, now)
            continue
        conn.execute(
            f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) "
            f"SELECT ?, \"_id\", ?, ? FROM {table} WHERE {where} AND \"_partition\" = ? AND \"_id\" > ? "
            "AND \"_id\" <= ? AND \"_id\" NOT IN (SELECT id FROM temp.mk_exclude)",
            (consumer_id, now, partition, *params, partition, first_failed, upto),
        )
        if first_failed - 1 > committed:
            _advance(conn, topic, table, consumer_id, partition, first_failed - 1, now, fold=False)
    return acked


# -- offsets (consumer groups) ---------------------------------------------------------
def commit_offset_in_current_transaction(
    conn: sqlite3.Connection, topic: str, consumer_id: int, partition: int, offset: int, now: str
) -> bool:
    """Everything up to and including ``offset`` in ``partition`` is done for the consumer.

    Constant cost, whatever the offset covers: one offset row and the consumer's
    out-of-order acks at or below it (none when it consumes in order). Monotonic: an
    offset at or below the committed one changes nothing and returns False.
    """
    committed = committed_offset(conn, consumer_id, partition)
    if offset <= committed:
        return False
    table = quote_identifier(topic)
    acked_above = conn.execute(
        "SELECT 1 FROM _minikafka_acks WHERE consumer_id = ? AND row_id > ? AND partition = ? LIMIT 1",
        (consumer_id, offset, partition),
    ).fetchone()
    _advance(conn, topic, table, consumer_id, partition, offset, now, fold=acked_above is not None)
    return True


def seek_in_current_transaction(
    conn: sqlite3.Connection, topic: str, consumer_id: int, partition: int, offset: int, now: str
) -> None:
    """Set the consumer's offset in ``partition`` to exactly ``offset``, backwards or forwards.

    Rows up to ``offset`` count as done for it; every row above is pending for it
    again (its out-of-order acks there are dropped, rows handled for everyone reopen
    for it alone). Cost grows with the rows reopened.
    """
    _reopen(conn, topic, consumer_id, partition, offset + 1, MAX_ID, now, count=False)
    if offset > committed_offset(conn, consumer_id, partition):
        _advance(conn, topic, quote_identifier(topic), consumer_id, partition, offset, now, fold=False)


def lag(conn: sqlite3.Connection, topic: str, consumer_id: int | None, *, start: str = "earliest") -> dict[int, int]:
    """{partition: rows pending for the consumer}, from positions and row marks (counts.py):
    the cost does not grow with the lag.

    ``consumer_id`` None: for a consumer not registered yet, which would start at ``start``.
    """
    if consumer_id is None:
        return counts.pending_counts_from(conn, topic, start_offsets(conn, topic, start))
    return counts.pending_counts(conn, topic, consumer_id)


# -- replay and drop -------------------------------------------------------------------
def _reopen(conn, topic: str, consumer_id: int, partition: int, lo: int, hi: int, now: str, *, count: bool) -> int:
    """Make rows ``lo <= _id <= hi`` of one partition pending again for one consumer.

    Rows there handled for everyone stay done for every other consumer (as their acks)
    and stop being handled for everyone; rows above the range that were handled for
    everyone stay so.
    """
    table = quote_identifier(topic)
    committed = committed_offset(conn, consumer_id, partition)
    position = _handled_upto(conn, topic, partition)
    reopened = 0
    if count:
        reopened = conn.execute(
            f"SELECT count(*) FROM {table} WHERE \"_partition\" = ? AND \"_id\" BETWEEN ? AND ? AND "
            f"(\"_id\" <= ? OR \"_id\" <= ? OR {_ACKED} OR {_MARKED})",
            (partition, lo, hi, committed, position, consumer_id, topic),
        ).fetchone()[0]
    explicit = f"(\"_id\" <= ? OR {_MARKED})"
    for other in (c for c in consumer_ids(conn, topic) if c != consumer_id):
        conn.execute(
            f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) "
            f"SELECT ?, \"_id\", ?, ? FROM {table} WHERE \"_partition\" = ? AND \"_id\" BETWEEN ? AND ? "
            f"AND {explicit}",
            (other, now, partition, partition, max(lo, committed_offset(conn, other, partition) + 1), hi,
             position, topic),
        )
    if position >= lo:
        if hi < position:  # handled for everyone above the range: it stays so, as marks
            conn.execute(
                f"INSERT OR IGNORE INTO _minikafka_handled (topic, row_id, partition, handled_at) "
                f"SELECT ?, \"_id\", \"_partition\", ? FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? "
                "AND \"_id\" <= ?",
                (topic, now, partition, hi, position),
            )
        _set_handled_upto(conn, topic, partition, max(0, lo - 1), now)
    conn.execute("DELETE FROM _minikafka_handled WHERE topic = ? AND partition = ? AND row_id BETWEEN ? AND ?",
                 (topic, partition, lo, hi))
    if committed >= lo:
        if hi < committed:  # done for this consumer above the range: it stays so, as acks
            conn.execute(
                f"INSERT OR IGNORE INTO _minikafka_acks (consumer_id, row_id, acked_at, partition) "
                f"SELECT ?, \"_id\", ?, ? FROM {table} WHERE \"_partition\" = ? AND \"_id\" > ? AND \"_id\" <= ?",
                (consumer_id, now, partition, partition, hi, committed),
            )
        _set_committed(conn, consumer_id, partition, max(0, lo - 1), now)
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


def drop_consumer_in_current_transaction(conn: sqlite3.Connection, topic: str, consumer_id: int) -> int:
    """Unregister a consumer; rows now done for every remaining consumer turn 'handled'.

    Returns the number of rows that turned handled (counted over the rows the dropped
    consumer still had pending).
    """
    table = quote_identifier(topic)
    done = 0
    if [c for c in consumer_ids(conn, topic) if c != consumer_id]:
        pending, params = pending_filter(consumer_id, topic)
        others = (f"NOT EXISTS (SELECT 1 FROM _minikafka_consumers k WHERE k.topic = ? AND k.id != ? "
                  f"AND NOT {status.render(status.PAST, topic, 'k.id')})")
        done = conn.execute(f"SELECT count(*) FROM {table} WHERE {pending} AND {others}",
                            (*params, topic, consumer_id)).fetchone()[0]
    conn.execute("DELETE FROM _minikafka_consumers WHERE id = ?", (consumer_id,))
    return done

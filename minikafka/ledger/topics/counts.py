"""Counts that do not scan: how many rows a topic holds, is new, or is pending for a consumer.

A topic's state is positions plus a few rows above them (acks.py), so every count is
"rows of a partition in an id range" less the marks and acks above a position. Ids are
offsets, not a dense sequence (a partitioned topic interleaves its partitions' ids,
retention deletes rows), so the rows in a range are read from **row marks**:
``_minikafka_row_counts (topic, partition, upto, rows)`` says that partition ``partition``
of ``topic`` holds ``rows`` rows with ``_id <= upto``. Writers add marks as rows are
appended (:func:`note_appended_in_current_transaction`, at least every :data:`SPACING`
rows of a partition, in the transaction that appended them), so the rows at or below any
id are the nearest mark below it plus a count of at most ``SPACING`` rows after it.

Marks are only ever correct or missing: a writer that adds none leaves counts exact and
a little slower (the count after the last mark grows), never wrong. Deleting rows
(retention) drops the marks at and above the first deleted id in the same transaction
(:func:`forget_from_in_current_transaction`). A crash rolls marks back with the rows.

The formulas, per partition with ``H`` its handled position (``_minikafka_partitions``),
``c`` a consumer with committed offset ``o_c``:

- rows: the rows of the partition (a mark, and the rows after the last one);
- pending for ``c``: rows above ``max(o_c, H)``, less the marked rows (handled out of order)
  and ``c``'s acks above it (only rows that still exist count);
- new (topic-wide): with no consumer, rows above ``H`` less the marked ones; with
  consumers, rows above ``L = max(H, min o_c)`` less the marked ones, less those every
  consumer is past (acked by the consumer lowest ``o_c``, and by each consumer below them).

All functions run inside the caller's transaction (or read snapshot) and never commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from .identifiers import quote_identifier

SPACING = 4096  # rows of a partition between two marks at most (a count reads no more rows than this)
MAX_ID = 2**63 - 1


def _partitions(conn: sqlite3.Connection, topic: str) -> int:
    row = conn.execute("SELECT partitions FROM _minikafka_topics WHERE name = ?", (topic,)).fetchone()
    return int(row[0]) if row else 1


def _in_partition(partitions: int) -> str:
    """The partition condition of a topic's rows (none for one partition: it has no partition index)."""
    return '"_partition" = ? AND ' if partitions > 1 else ""


def _last_mark(conn: sqlite3.Connection, topic: str, partition: int, at_most: int | None = None) -> tuple[int, int]:
    """(upto, rows) of the partition's highest mark (at or below ``at_most``); (0, 0) without one."""
    if at_most is None:
        row = conn.execute(
            "SELECT upto, rows FROM _minikafka_row_counts WHERE topic = ? AND partition = ? "
            "ORDER BY upto DESC LIMIT 1", (topic, partition)).fetchone()
    else:
        row = conn.execute(
            "SELECT upto, rows FROM _minikafka_row_counts WHERE topic = ? AND partition = ? AND upto <= ? "
            "ORDER BY upto DESC LIMIT 1", (topic, partition, at_most)).fetchone()
    return (row[0], row[1]) if row else (0, 0)


def rows_upto(conn: sqlite3.Connection, topic: str, partition: int, upto: int | None = None, *,
              partitions: int | None = None) -> int:
    """Rows of ``partition`` of ``topic`` with ``_id <= upto`` (None: all of them)."""
    n = _partitions(conn, topic) if partitions is None else partitions
    mark, rows = _last_mark(conn, topic, partition, upto)
    cond = _in_partition(n)
    params: tuple = (partition,) if n > 1 else ()
    table = quote_identifier(topic)
    if upto is None:
        rest = conn.execute(f'SELECT count(*) FROM {table} WHERE {cond}"_id" > ?', (*params, mark)).fetchone()[0]
    else:
        rest = conn.execute(f'SELECT count(*) FROM {table} WHERE {cond}"_id" > ? AND "_id" <= ?',
                            (*params, mark, upto)).fetchone()[0] if upto > mark else 0
    return rows + rest


def note_appended_in_current_transaction(conn: sqlite3.Connection, topic: str, *,
                                         partitions: int | None = None, top: int | None = None) -> None:
    """Add row marks over the rows appended to ``topic`` since its last marks.

    One lookup while fewer than ``SPACING`` ids were handed out since the topic's highest
    mark; then the rows appended since are counted once: a mark every ``SPACING`` rows of
    a partition (``rows`` a multiple of it, kept) and one at the partition's last row
    (replaced by the next). ``top``: the topic's highest id, when the caller knows it.
    """
    table = quote_identifier(topic)
    if top is None:
        top = conn.execute(f'SELECT max("_id") FROM {table}').fetchone()[0] or 0
    noted = conn.execute("SELECT max(upto) FROM _minikafka_row_counts WHERE topic = ?", (topic,)).fetchone()[0] or 0
    if top - noted < SPACING:  # ids >= rows: fewer than SPACING rows of any partition since its marks
        return
    n = _partitions(conn, topic) if partitions is None else partitions
    if n == 1:
        touched = [0]
    else:
        touched = [r[0] for r in conn.execute(f'SELECT DISTINCT "_partition" FROM {table} WHERE "_id" > ?', (noted,))]
    cond = _in_partition(n)
    marks = []
    for partition in touched:
        params: tuple = (partition,) if n > 1 else ()
        mark, rows = _last_mark(conn, topic, partition)
        trailing = mark if rows % SPACING else None
        while True:
            step = SPACING - rows % SPACING
            nxt = conn.execute(f'SELECT "_id" FROM {table} WHERE {cond}"_id" > ? ORDER BY "_id" LIMIT 1 OFFSET ?',
                               (*params, mark, step - 1)).fetchone()
            if nxt is None:
                break
            mark, rows = nxt[0], rows + step
            marks.append((topic, partition, mark, rows))
        last, more = conn.execute(f'SELECT max("_id"), count(*) FROM {table} WHERE {cond}"_id" > ?',
                                  (*params, mark)).fetchone()
        if last is not None:
            marks.append((topic, partition, last, rows + more))
        if trailing is not None and (last is not None or mark != trailing):
            conn.execute("DELETE FROM _minikafka_row_counts WHERE topic = ? AND partition = ? AND upto = ?",
                         (topic, partition, trailing))
    conn.executemany("INSERT OR REPLACE INTO _minikafka_row_counts (topic, partition, upto, rows) "
                     "VALUES (?, ?, ?, ?)", marks)


def forget_from_in_current_transaction(conn: sqlite3.Connection, topic: str, first_id: int = 0) -> None:
    """Drop ``topic``'s marks at or above ``first_id`` (rows there were deleted); the next
    :func:`note_appended_in_current_transaction` marks them again."""
    conn.execute("DELETE FROM _minikafka_row_counts WHERE topic = ? AND upto >= ?", (topic, first_id))


def forget_topic_in_current_transaction(conn: sqlite3.Connection, topic: str) -> None:
    """Drop every mark of ``topic`` (its table was dropped)."""
    conn.execute("DELETE FROM _minikafka_row_counts WHERE topic = ?", (topic,))


# -- counts ----------------------------------------------------------------------------
def total_rows(conn: sqlite3.Connection, topic: str) -> int:
    """Rows ``topic`` holds (reads at most ``SPACING`` rows per partition)."""
    n = _partitions(conn, topic)
    return sum(rows_upto(conn, topic, p, partitions=n) for p in range(n))


@dataclass(frozen=True)
class TopicCounts:
    """Rows of a topic: ``total``, ``new`` (not handled topic-wide), ``handled``, and the highest id."""

    total: int
    new: int
    high_watermark: int

    @property
    def handled(self) -> int:
        return self.total - self.new


def _positions(conn: sqlite3.Connection, topic: str) -> dict[int, int]:
    return dict(conn.execute("SELECT partition, handled_upto FROM _minikafka_partitions WHERE topic = ?", (topic,)))


def _offsets(conn: sqlite3.Connection, topic: str) -> dict[int, dict[int, int]]:
    """{consumer id: {partition: committed}} of every consumer of ``topic`` (an empty dict
    for a consumer without offset rows)."""
    out: dict[int, dict[int, int]] = {}
    for cid, partition, committed in conn.execute(
            "SELECT k.id, o.partition, o.committed FROM _minikafka_consumers k LEFT JOIN _minikafka_offsets o "
            "ON o.consumer_id = k.id WHERE k.topic = ?", (topic,)):
        got = out.setdefault(cid, {})
        if partition is not None:
            got[partition] = committed
    return out


def _marked_above(conn: sqlite3.Connection, topic: str, table: str, partition: int, low: int,
                  upto: int = MAX_ID) -> int:
    """Rows of the partition in (``low``, ``upto``] handled out of order (marks of deleted
    rows left out)."""
    return conn.execute(
        f"SELECT count(*) FROM _minikafka_handled h WHERE h.topic = ? AND h.partition = ? AND h.row_id > ? "
        f"AND h.row_id <= ? AND EXISTS (SELECT 1 FROM {table} t WHERE t.\"_id\" = h.row_id)",
        (topic, partition, low, upto)).fetchone()[0]


def pending_counts(conn: sqlite3.Connection, topic: str, consumer_id: int, upto: int | None = None,
                   partitions: Iterable[int] | None = None) -> dict[int, int]:
    """{partition: rows pending for the consumer} (what ``acks.lag`` counts; with ``upto``
    only rows with ids up to it; ``partitions``: only those), without a scan.

    Cost: the consumer's acks and the topic's marks above its position, and at most
    ``SPACING`` rows per partition.
    """
    n = _partitions(conn, topic)
    table = quote_identifier(topic)
    positions = _positions(conn, topic)
    offsets = dict(conn.execute("SELECT partition, committed FROM _minikafka_offsets WHERE consumer_id = ?",
                                (consumer_id,)))
    out = {}
    for partition in (range(n) if partitions is None else partitions):
        low = max(offsets.get(partition, 0), positions.get(partition, 0))
        if upto is not None and upto <= low:
            out[partition] = 0
            continue
        rows = rows_upto(conn, topic, partition, upto, partitions=n) - rows_upto(conn, topic, partition, low,
                                                                              partitions=n)
        top = MAX_ID if upto is None else upto
        acked = conn.execute(
            f"SELECT count(*) FROM _minikafka_acks a WHERE a.consumer_id = ? AND a.partition = ? AND a.row_id > ? "
            f"AND a.row_id <= ? AND EXISTS (SELECT 1 FROM {table} t WHERE t.\"_id\" = a.row_id) AND NOT EXISTS "
            "(SELECT 1 FROM _minikafka_handled h WHERE h.topic = ? AND h.row_id = a.row_id)",
            (consumer_id, partition, low, top, topic)).fetchone()[0]
        out[partition] = rows - _marked_above(conn, topic, table, partition, low, top) - acked
    return out


def pending_counts_from(conn: sqlite3.Connection, topic: str, offsets: dict[int, int]) -> dict[int, int]:
    """{partition: rows above ``offsets`` not handled topic-wide}: what a consumer not
    registered yet, starting at ``offsets``, would have pending."""
    n = _partitions(conn, topic)
    table = quote_identifier(topic)
    positions = _positions(conn, topic)
    out = {}
    for partition in range(n):
        low = max(offsets.get(partition, 0), positions.get(partition, 0))
        rows = rows_upto(conn, topic, partition, partitions=n) - rows_upto(conn, topic, partition, low, partitions=n)
        out[partition] = rows - _marked_above(conn, topic, table, partition, low)
    return out


def topic_counts(conn: sqlite3.Connection, topic: str) -> TopicCounts:
    """The topic's rows, new rows (topic-wide status) and high watermark, without a scan.

    Cost: marks above the positions and the lowest consumer's acks, and at most
    ``SPACING`` rows per partition and position read.
    """
    n = _partitions(conn, topic)
    table = quote_identifier(topic)
    positions = _positions(conn, topic)
    offsets = _offsets(conn, topic)
    total = new = 0
    for partition in range(n):
        rows = rows_upto(conn, topic, partition, partitions=n)
        total += rows
        handled_upto = positions.get(partition, 0)
        if not offsets:
            low = handled_upto
            new += rows - rows_upto(conn, topic, partition, low, partitions=n) - _marked_above(
                conn, topic, table, partition, low)
            continue
        lowest, first = min((o.get(partition, 0), cid) for cid, o in offsets.items())
        low = max(handled_upto, lowest)
        # rows above low that every consumer is past: acked by the lowest consumer, and by
        # each other consumer whose offset is below them
        others = [cid for cid in offsets if cid != first]
        past_others = "".join(" AND (a.row_id <= ? OR EXISTS (SELECT 1 FROM _minikafka_acks b WHERE "
                              "b.consumer_id = ? AND b.row_id = a.row_id))" for _ in others)
        params = [v for cid in others for v in (offsets[cid].get(partition, 0), cid)]
        all_past = conn.execute(
            f"SELECT count(*) FROM _minikafka_acks a WHERE a.consumer_id = ? AND a.partition = ? AND a.row_id > ? "
            f"AND EXISTS (SELECT 1 FROM {table} t WHERE t.\"_id\" = a.row_id) AND NOT EXISTS (SELECT 1 FROM "
            f"_minikafka_handled h WHERE h.topic = ? AND h.row_id = a.row_id){past_others}",
            (first, partition, low, topic, *params)).fetchone()[0]
        new += rows - rows_upto(conn, topic, partition, low, partitions=n) - _marked_above(
            conn, topic, table, partition, low) - all_past
    top = conn.execute(f'SELECT coalesce(max("_id"), 0) FROM {table}').fetchone()[0]
    return TopicCounts(total, new, top)

"""Read models for people: what ``minikafka topics/show`` and the console's pages show, built once.

- ``topic_overview``: a topic's counts, partitions, consumers with their positions and its
  quarantined rows (``TopicOverview``);
- ``consumer_positions``: one consumer's committed offset and lag per partition
  (``ConsumerPositions``), the record the topics list, a topic's page and the consumers page share;
- ``RowFilter`` and ``row_select``/``row_page``: the rows matching a parsed filter (field conditions,
  and new/handled topic-wide or as one consumer sees it), with a per-row status column for
  the consumers asked for. The SQL of the condition and of the status columns is composed
  here, from ``acks`` and ``filters``; a caller passes the filter, never SQL text;
- ``queue_jobs``: a work queue's live jobs, a processing job whose lease expired read as pending
  (``job_state``, the one place that says so).

Each model is a dataclass: the CLI prints ``as_dict()`` as JSON, the console's templates read
the same attributes. All functions read inside the caller's transaction (the console's
``read_snapshot``) and never write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field

from ..topics import acks, counts, filters, keyed
from ..topics.layout import TopicLayout
from ..topics.table import TopicTable
from . import quarantine, queues

STATUSES = ("new", "handled")


# -- consumer positions ------------------------------------------------------------------------
@dataclass(frozen=True)
class PartitionPosition:
    """One partition as one consumer sees it: its committed offset and the rows pending above it."""

    partition: int
    committed: int
    lag: int


@dataclass
class ConsumerPositions:
    """A consumer of a topic and its position in each partition."""

    name: str
    partitions: list[PartitionPosition] = field(default_factory=list)

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    def as_dict(self) -> dict:
        """``{name, partitions: [{partition, committed, lag}]}``."""
        return {"name": self.name, "partitions": [asdict(p) for p in self.partitions]}


def consumer_positions(conn: sqlite3.Connection, topic: str, name: str, consumer_id: int) -> ConsumerPositions:
    """``name``'s committed offset and lag (from positions and row marks: no scan) per partition."""
    offsets, lag = acks.committed_offsets(conn, consumer_id), counts.pending_counts(conn, topic, consumer_id)
    return ConsumerPositions(name, [PartitionPosition(p, offsets.get(p, 0), lag[p]) for p in sorted(lag)])


def topic_positions(conn: sqlite3.Connection, topic: str) -> list[ConsumerPositions]:
    """Every consumer of ``topic`` with its positions, in the order they registered."""
    return [consumer_positions(conn, topic, name, acks.find_consumer(conn, topic, name))
            for name in acks.consumer_names(conn, topic)]


# -- topic overview ----------------------------------------------------------------------------
@dataclass
class TopicOverview:
    """A topic at a glance: rows new (not handled topic-wide) and handled, the highest id, its
    partitions, each consumer with its positions (``groups``) and the rows in its quarantine."""

    topic: str
    new: int
    handled: int
    total: int
    high_watermark: int
    partitions: int
    groups: list[ConsumerPositions]
    quarantined: int
    table: dict | None = None  # a keyed table: {key, merge, current (keys), superseded (versions kept)}

    @property
    def consumers(self) -> list[str]:
        return [g.name for g in self.groups]

    def as_dict(self) -> dict:
        """The ``minikafka topics --json`` record: {topic, new, handled, total, high_watermark,
        partitions, consumers, groups: [{name, partitions: [{partition, committed, lag}]}], quarantined}, and
        for a keyed table ``table``: {key, merge, current, superseded}."""
        out = {"topic": self.topic, "new": self.new, "handled": self.handled, "total": self.total,
               "high_watermark": self.high_watermark, "partitions": self.partitions, "consumers": self.consumers,
               "groups": [g.as_dict() for g in self.groups], "quarantined": self.quarantined}
        if self.table is not None:
            out["table"] = self.table
        return out


def topic_overview(conn: sqlite3.Connection, layout: TopicLayout) -> TopicOverview:
    """``layout``'s topic at a glance; every figure from positions and row marks, whatever its size."""
    tally = counts.topic_counts(conn, layout.name)  # rows committed by offset count as handled
    spec = keyed.table_spec(conn, layout.name)
    table = None if spec is None else {"key": list(spec.key), "merge": dict(spec.merge),
                                       "current": keyed.count_current(conn, layout.name),
                                       "superseded": keyed.count_superseded(conn, layout.name)}
    return TopicOverview(layout.name, tally.new, tally.handled, tally.total, tally.high_watermark, layout.partitions,
                         topic_positions(conn, layout.name), quarantine.count_quarantined(conn, layout.name), table)


# -- rows matching a filter --------------------------------------------------------------------
@dataclass(frozen=True)
class RowFilter:
    """Which rows of a topic a person asked for.

    ``where``: ``FIELD OP VALUE`` conditions (``filters``: checked against the topic's columns,
    values always parameters); ``status``: 'new' or 'handled' (None: both), topic-wide or, with
    ``consumer_id``, as that consumer sees it.
    """

    where: tuple[str, ...] = ()
    status: str | None = None
    consumer_id: int | None = None

    def condition(self, layout: TopicLayout) -> tuple[str, tuple]:
        """The SQL condition on the topic table and its parameters.

        Raises:
            InvalidFilterError: a ``where`` condition names no column, or its value does not fit it.
            ValueError: ``status`` is neither 'new' nor 'handled'.
        """
        conds, params = [], []
        if self.status is not None:
            if self.status not in STATUSES:
                raise ValueError(f"status must be new or handled, got {self.status!r}")
            pick = acks.pending_filter if self.status == "new" else acks.done_filter
            sql, p = pick(self.consumer_id, layout.name)
            conds.append(sql)
            params.extend(p)
        sql, p = filters.where_clause(layout, self.where)
        conds.append(sql)
        params.extend(p)
        return " AND ".join(f"({c})" for c in conds), tuple(params)


@dataclass
class RowSelect:
    """The rows a ``RowFilter`` matches, read by id ranges: each row is ``TopicLayout.select_sql``'s
    columns, then one 'new'/'handled' column per consumer in ``status_for`` (that order)."""

    table: TopicTable
    condition: str
    params: tuple
    select: str
    select_params: tuple

    def after(self, after: int, limit: int) -> list[tuple]:
        """Up to ``limit`` matching rows with ``_id > after`` (-1: all), oldest first."""
        return self.table.page(after, limit, self.condition, (*self.select_params, *self.params), select=self.select)

    def before(self, before: int, limit: int) -> list[tuple]:
        """Up to ``limit`` matching rows with ``_id < before``, the newest of them, oldest first."""
        return self.table.page_before(before, limit, self.condition, (*self.select_params, *self.params),
                                      select=self.select)

    def scan(self, page: int) -> Iterator[list[tuple]]:
        """Every matching row, oldest first, in lists of at most ``page`` rows, each read after the
        previous one is used (``TopicTable.scan``)."""
        return self.table.scan(self.condition, (*self.select_params, *self.params), page=page, select=self.select)

    def nth_from_end(self, n: int) -> int | None:
        """The id of the ``n``-th last matching row (None when fewer match)."""
        return self.table.nth_from_end(n, self.condition, self.params)

    def any_before(self, before: int) -> bool:
        return bool(self.table.page_before(before, 1, self.condition, self.params, select=self.table.ids_select))

    def any_after(self, after: int) -> bool:
        return bool(self.table.page(after, 1, self.condition, self.params, select=self.table.ids_select))


def row_select(conn: sqlite3.Connection, layout: TopicLayout, rows: RowFilter = RowFilter(),
               status_for: Sequence[int] = ()) -> RowSelect:
    """The rows ``rows`` matches, with a status column for each consumer id in ``status_for``."""
    columns, params = [], []
    for consumer_id in status_for:
        column, p = acks.status_column(consumer_id)
        columns.append(column)
        params.extend(p)
    cond, cond_params = rows.condition(layout)
    return RowSelect(TopicTable(conn, layout), cond, cond_params, layout.select_sql(columns), tuple(params))


@dataclass
class RowPage:
    """One page of a topic's rows, oldest first.

    ``rows``: dicts with ``_id``, ``_created_at``, ``_status``, ``_parent_id``, ``_partition``, then the
    fields, then ``_consumers`` ({consumer: 'new' | 'handled'}). ``older``/``newer``: whether rows
    matching the filter lie before the first or after the last row of the page.
    """

    rows: list[dict] = field(default_factory=list)
    older: bool = False
    newer: bool = False

    @property
    def first_id(self) -> int | None:
        return self.rows[0]["_id"] if self.rows else None

    @property
    def last_id(self) -> int | None:
        return self.rows[-1]["_id"] if self.rows else None


def row_page(conn: sqlite3.Connection, layout: TopicLayout, rows: RowFilter = RowFilter(), *,
             after: int | None = None, before: int | None = None, limit: int = 50) -> RowPage:
    """The page of rows ``rows`` matches after ``after`` (or before ``before``; neither: the first
    page), each with its status for every consumer of the topic.

    A page is a range of ids: ``after`` (the last id of the previous page) going forward,
    ``before`` (the first id of the next page) going back, so each page costs the rows it shows
    however deep into a large topic it is (``LIMIT ... OFFSET`` would read every row before it).

    Raises:
        InvalidFilterError: a ``where`` condition does not fit the topic's columns.
    """
    consumers = [(name, acks.find_consumer(conn, layout.name, name)) for name in acks.consumer_names(conn, layout.name)]
    selected = row_select(conn, layout, rows, [cid for _, cid in consumers])
    if before is not None:
        fetched = selected.before(before, limit + 1)
        more, fetched = len(fetched) > limit, fetched[-limit:] if fetched else fetched
    else:
        fetched = selected.after(after or 0, limit + 1)
        more, fetched = len(fetched) > limit, fetched[:limit]
    decode = layout.decoder()
    handled = acks.handled_positions(conn, layout.name)
    at = layout.partition_index
    out = []
    for r in fetched:
        row = {"_id": r[0], "_created_at": r[1], "_status": acks.status_of(r[2], r[0], r[at], handled),
               "_parent_id": r[4], "_partition": r[at]}
        row.update(decode(r[:at + 1]))
        row["_consumers"] = {name: r[at + 1 + i] for i, (name, _) in enumerate(consumers)}
        out.append(row)
    page = RowPage(out)
    if out:
        page.older = more if before is not None else selected.any_before(out[0]["_id"])
        page.newer = more if before is None else selected.any_after(out[-1]["_id"])
    return page


# -- a work queue's jobs -----------------------------------------------------------------------
def job_state(state: str, lease_expires_ms: int | None, now_ms: int) -> str:
    """A live job's state as read: a processing job whose lease expired reads as pending (any
    worker may claim it again)."""
    if state == "processing" and lease_expires_ms is not None and lease_expires_ms <= now_ms:
        return "pending"
    return state


@dataclass(frozen=True)
class QueueJob:
    """One live job of a work queue (times in ms since the epoch; ``worker`` only while processing)."""

    id: int
    state: str
    attempts: int
    run_at: int | None
    last_error: str | None
    worker: str | None
    lease_expires_at: int | None
    priority: int


def queue_jobs(conn: sqlite3.Connection, consumer_id: int, now_ms: int, *, state: str | None = None,
               limit: int = 100) -> list[QueueJob]:
    """The queue's live jobs (pending, processing, dead), oldest first, each in its state as read
    (``job_state``); ``state``: only jobs in that state (as read)."""
    out = []
    for row_id, stored, attempts, run_at, error, worker, lease, priority in queues.list_jobs(conn, consumer_id,
                                                                                           limit=limit):
        st = job_state(stored, lease, now_ms)
        if state and st != state:
            continue
        out.append(QueueJob(row_id, st, attempts, run_at, error, worker if st == "processing" else None,
                            lease if st == "processing" else None, priority))
    return out

"""Reading a topic page by page for a person: counts, and rows by id ranges (never OFFSET).

A page of rows is a range of ids: ``after`` (the last id of the previous page) going forward,
``before`` (the first id of the next page) going back. Each page costs the rows it shows,
however deep into a large topic it is; ``LIMIT ... OFFSET`` would read and throw away every
row before the page. Each row can carry its status for every consumer of the topic. Every
statement on the topic's rows goes through its ``TopicTable``; this module builds the
conditions (positions and acks, from ``acks``) and shapes the rows for a page.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from . import acks, counts
from .layout import TopicLayout
from .table import TopicTable


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


def topic_counts(conn: sqlite3.Connection, layout: TopicLayout) -> dict[str, int]:
    """``{"new", "handled", "total", "high_watermark"}`` of a topic, as ``minikafka topics`` counts them:
    from positions and row marks (``counts.topic_counts``), whatever the topic's size."""
    tally = counts.topic_counts(conn, layout.name)
    return {"new": tally.new, "handled": tally.handled, "total": tally.total, "high_watermark": tally.high_watermark}


def consumer_lag(conn: sqlite3.Connection, topic: str, consumer_id: int) -> dict[int, int]:
    """{partition: rows pending for the consumer}, as ``acks.lag``: from positions and row marks
    (``counts.pending_counts``)."""
    return counts.pending_counts(conn, topic, consumer_id)


def row_page(conn: sqlite3.Connection, layout: TopicLayout, *, after: int | None = None, before: int | None = None,
             condition: tuple[str, tuple] = ("1", ()), limit: int = 50) -> RowPage:
    """The ``limit`` rows matching ``condition`` just after id ``after`` (default: from the start),
    or, with ``before``, just before id ``before``.

    Args:
        condition: an SQL condition on the topic table and its parameters (``filters.where_clause``).
    """
    cond, cond_params = condition
    consumers = [(name, acks.find_consumer(conn, layout.name, name)) for name in acks.consumer_names(conn, layout.name)]
    extra, extra_params = "", []
    for _, cid in consumers:
        done, dparams = acks.done_filter(cid)
        extra += f", CASE WHEN {done} THEN 'handled' ELSE 'new' END"
        extra_params.extend(dparams)
    select = layout.select_sql().replace(f" FROM {layout.table}", f"{extra} FROM {layout.table}", 1)
    table = TopicTable(conn, layout)
    params = (*extra_params, *cond_params)  # the select's marks come first in the statement
    if before is not None:
        fetched = table.page_before(before, limit + 1, cond, params, select=select)
        more, fetched = len(fetched) > limit, fetched[-limit:] if fetched else fetched
    else:
        fetched = table.page(after or 0, limit + 1, cond, params, select=select)
        more, fetched = len(fetched) > limit, fetched[:limit]
    decode = layout.decoder()
    handled = acks.handled_positions(conn, layout.name)
    at = layout.partition_index
    rows = []
    for r in fetched:
        row = {"_id": r[0], "_created_at": r[1], "_status": acks.status_of(r[2], r[0], r[at], handled),
               "_parent_id": r[4], "_partition": r[at]}
        row.update(decode(r[:at + 1]))
        row["_consumers"] = {name: r[at + 1 + i] for i, (name, _) in enumerate(consumers)}
        rows.append(row)
    page = RowPage(rows)
    if rows:
        cheap = 'SELECT "_id" FROM ' + layout.table  # existence only: no status columns
        page.older = more if before is not None else bool(table.page_before(rows[0]["_id"], 1, cond, cond_params,
                                                                             select=cheap))
        page.newer = more if before is None else bool(table.page(rows[-1]["_id"], 1, cond, cond_params,
                                                                 select=cheap))
    return page


def ids_created_between(conn: sqlite3.Connection, layout: TopicLayout, since: str, until: str | None,
                        margin_s: float = 5.0) -> tuple[int, int]:
    """(lowest, highest) id of the rows created from ``since`` to ``until`` (None: now), each end widened
    by ``margin_s`` seconds; found by bisecting the ids (ids grow with creation time), not by a scan.

    Bounds the search for the rows one run wrote (``_run_id`` has no index).
    """
    from datetime import timedelta

    from ...util.clock import format_timestamp, parse_timestamp

    lo_time = format_timestamp(parse_timestamp(since) - timedelta(seconds=margin_s))
    hi_time = None if until is None else format_timestamp(parse_timestamp(until) + timedelta(seconds=margin_s))
    table = TopicTable(conn, layout)
    top = table.high_watermark()

    def first_at_or_after(when: str, *, strictly: bool = False) -> int:
        """The smallest id whose row was created at (unless ``strictly``) or after ``when`` (top + 1 when none)."""
        lo, hi = 1, top + 1
        while lo < hi:
            mid = (lo + hi) // 2
            row = table.first_from(mid)
            if row is None or row[1] > when or (row[1] == when and not strictly):
                hi = mid
            else:
                lo = row[0] + 1
        return lo

    first = first_at_or_after(lo_time)
    last = top if hi_time is None else first_at_or_after(hi_time, strictly=True) - 1
    return first, last

"""Reading a topic page by page for a person: counts, and rows by id ranges (never OFFSET).

A page of rows is a range of ids: ``after`` (the last id of the previous page) going forward,
``before`` (the first id of the next page) going back. Each page costs the rows it shows,
however deep into a large topic it is; ``LIMIT ... OFFSET`` would read and throw away every
row before the page. Each row can carry its status for every consumer of the topic.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from . import acks
from .layout import TopicLayout


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
    """``{"new", "handled", "total", "high_watermark"}`` of a topic, as ``minikafka topics`` counts them."""
    where, params = acks.pending_filter(None, layout.name)
    new, total, high = conn.execute(
        f'SELECT (SELECT count(*) FROM {layout.table} WHERE {where}), count(*), coalesce(max("_id"), 0) '
        f"FROM {layout.table}", params).fetchone()
    return {"new": new, "handled": total - new, "total": total, "high_watermark": high}


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
    base = layout.select_sql().replace(f" FROM {layout.table}", f"{extra} FROM {layout.table}", 1)
    backward = before is not None
    if backward:
        bound, order = ('"_id" < ?', before), "DESC"
    else:
        bound, order = ('"_id" > ?', after or 0), "ASC"
    sql = f'{base} WHERE ({cond}) AND {bound[0]} ORDER BY "_id" {order} LIMIT ?'
    fetched = conn.execute(sql, (*extra_params, *cond_params, bound[1], limit + 1)).fetchall()
    more = len(fetched) > limit
    fetched = fetched[:limit]
    if backward:
        fetched.reverse()
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
    if backward:
        page.older, page.newer = more, bool(rows) and _exists(conn, layout, cond, cond_params, '"_id" > ?', rows[-1]["_id"])
    else:
        page.newer = more
        page.older = bool(rows) and _exists(conn, layout, cond, cond_params, '"_id" < ?', rows[0]["_id"])
    return page


def _exists(conn: sqlite3.Connection, layout: TopicLayout, cond: str, params: tuple, bound: str, at: int) -> bool:
    sql = f"SELECT 1 FROM {layout.table} WHERE ({cond}) AND {bound} LIMIT 1"
    return conn.execute(sql, (*params, at)).fetchone() is not None

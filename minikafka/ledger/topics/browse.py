"""Finding a person's rows by time: the id range of the rows created in a time span, by bisection.

Ids grow with creation time, so the rows one run wrote (``_run_id`` has no index) are
bounded by a bisection over the ids, each step one indexed read, never a scan. The pages
of rows people read, with their status per consumer, are ``consuming.read_models``'.
"""

from __future__ import annotations

import sqlite3

from .layout import TopicLayout
from .table import TopicTable


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

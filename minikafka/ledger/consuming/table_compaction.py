"""Compaction of a keyed table that never takes a version a running stage may still read.

A stage reads a keyed table (as a lookup, or through its context) as of the snapshot its plan
took: each key's newest version at or below the snapshot's high-water id (``topics/asof.py``).
A version superseded after that snapshot is still the current one for that stage, though
every consumer of the table may have acked it. So compaction keeps every superseded version
whose successor was written at or after the start of the oldest stage run still in
progress (a 'running' row whose process is alive, or on another host that cannot be
checked): a run's plan is taken after its 'running' row, so what it may read was superseded
no earlier than that. Runs whose process is gone protect nothing.
"""

from __future__ import annotations

import sqlite3

from ..topics import keyed
from ..topics.layout import TopicLayout
from .runlog import COLUMNS, decoded, liveness


def oldest_running_stage_start(conn: sqlite3.Connection) -> str | None:
    """When the oldest stage run still in progress started (None: none is)."""
    rows = [decoded(dict(zip(COLUMNS, values))) for values in conn.execute(
        f"SELECT {', '.join(COLUMNS)} FROM _minikafka_runs WHERE status = 'running' AND kind = 'stage' "
        "ORDER BY started_at, rowid")]
    return next((r["started_at"] for r in rows if liveness(r) != "gone"), None)


def compact_table_in_current_transaction(conn: sqlite3.Connection, layout: TopicLayout) -> int:
    """``keyed.compact_in_current_transaction`` keeping what a running stage's snapshot may read."""
    return keyed.compact_in_current_transaction(conn, layout, keep_from=oldest_running_stage_start(conn))

"""The figures the Prometheus exposition shows, read from the ledger (``observe.prometheus`` formats them).

Every figure is what the ledger holds, never what a process remembers: a run that died is
seen by the next read. Each read costs what an index or the row marks give, not a scan
that grows with a topic: rows per topic from the row marks (``counts.total_rows``), lag per
consumer from its positions and the marks (``counts.pending_counts``), the newest row by id,
a stage's runs by the run log's ``(stage, started_at)`` index. Quarantine counts use the
quarantine's ``(topic, id)`` index; queue depths count job rows (plus the rows appended
above a queue's sync mark that have no job yet, as ``Queue.stats`` does).

Times are seconds since the epoch (UTC), as Prometheus wants them.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ...util.clock import parse_timestamp
from ..topics import counts
from ..topics.catalog import read_layout, topic_names
from ..topics.identifiers import quote_identifier
from ..topics.table import TopicTable
from . import queues
from .quarantine import quarantined_ever
from .runlog import COLUMNS, LIVE_RUNS, settled, stage_run_counts
from .vitals import CREATED_AT

FAILURE_STATUSES = ("failed", "interrupted")  # a stage's last failure: either (partial is not one)


def epoch(text: str | None) -> float | None:
    """Seconds since the epoch of a ledger timestamp (None stays None)."""
    when = parse_timestamp(text)
    return None if when is None else when.timestamp()


@dataclass(frozen=True)
class StageFigures:
    """One stage's latest run and when it last succeeded and last failed (None: never)."""

    stage: str
    last_status: str | None = None
    last_started: float | None = None
    last_duration_s: float | None = None
    rows_in: int = 0
    rows_out: int = 0
    rows_duplicate: int = 0
    rows_failed: int = 0
    rows_quarantined: int = 0
    last_success: float | None = None
    last_failure: float | None = None
    last_interrupted: float | None = None
    runs: dict[str, int] = field(default_factory=dict)  # runs in the run log by final status


@dataclass(frozen=True)
class TopicFigures:
    """A topic's rows now, when its newest row was appended, and how many rows were ever
    appended (its highest id: ids are never reused and the newest row is never deleted)."""

    topic: str
    rows: int
    newest_row: float | None
    appended: int = 0


@dataclass(frozen=True)
class ConsumerFigures:
    topic: str
    consumer: str
    lag: int


@dataclass(frozen=True)
class QueueFigures:
    """A work queue's jobs by state: pending (waiting, an expired lease, or a row with no job yet),
    processing (a valid lease), dead (in the dead letter)."""

    topic: str
    consumer: str
    pending: int
    processing: int
    dead: int


@dataclass(frozen=True)
class LedgerFigures:
    """Everything one scrape shows."""

    path: str
    file_bytes: int
    wal_bytes: int
    stages: list[StageFigures] = field(default_factory=list)
    topics: list[TopicFigures] = field(default_factory=list)
    consumers: list[ConsumerFigures] = field(default_factory=list)
    queues: list[QueueFigures] = field(default_factory=list)
    quarantined: dict[str, int] = field(default_factory=dict)  # topic -> rows in its quarantine
    last_backup: float | None = None  # the latest succeeded backup run's end
    newest_snapshot: float | None = None  # the newest snapshot of this ledger in the backups directory
    snapshots: int | None = None  # snapshots of this ledger there (None: no backups directory given)
    quarantined_ever: int = 0  # rows ever quarantined, all topics (never goes down)


def _latest(conn: sqlite3.Connection, stage: str, statuses: tuple[str, ...] | None = None) -> dict | None:
    """The stage's latest run (of ``statuses``, as ``settled`` shows them: a 'running' row
    whose process is gone is an interrupted run)."""
    where, params = "stage = ? AND kind = 'stage'", [stage]
    stored = (*statuses, "running") if statuses and "interrupted" in statuses else statuses
    if stored:
        where += f" AND status IN ({', '.join('?' for _ in stored)})"
        params += list(stored)
    cur = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM _minikafka_runs WHERE {where} "
                       "ORDER BY started_at DESC, rowid DESC LIMIT ?", (*params, LIVE_RUNS if statuses else 1))
    for values in cur:
        row = settled(dict(zip(COLUMNS, values)))
        if not statuses or row["status"] in statuses:
            return row
    return None


def _ended(run: dict | None) -> float | None:
    return None if run is None else epoch(run["finished_at"] or run["started_at"])


def stage_figures(conn: sqlite3.Connection, stage: str) -> StageFigures:
    """The stage's latest run (status, start, duration, rows) and its last success and failure."""
    last = _latest(conn, stage)
    if last is None:
        return StageFigures(stage, runs=stage_run_counts(conn, stage))
    return StageFigures(
        stage, last["status"], epoch(last["started_at"]), last["duration_s"],
        int(last["rows_in"] or 0), int(last["rows_out"] or 0), int(last["rows_duplicate"] or 0),
        int(last["rows_failed"] or 0), int(last["rows_quarantined"] or 0),
        _ended(_latest(conn, stage, ("succeeded",))), _ended(_latest(conn, stage, FAILURE_STATUSES)),
        _ended(_latest(conn, stage, ("interrupted",))), stage_run_counts(conn, stage))


def _queue_figures(conn: sqlite3.Connection, topic: str, consumer: str, consumer_id: int, now_ms: int) -> QueueFigures:
    by_state = queues.state_counts(conn, consumer_id, now_ms)
    synced = queues.synced_upto(conn, consumer_id) or 0
    top = conn.execute(f'SELECT coalesce(max("_id"), 0) FROM {_table(topic)}').fetchone()[0]
    unsynced = queues.count_unsynced(conn, consumer_id, _table(topic), synced) if top > synced else 0
    dead = queues.count_dead(conn, consumer_id, topic, consumer) if by_state.get("dead") else 0
    return QueueFigures(topic, consumer, by_state.get("pending", 0) + unsynced, by_state.get("processing", 0), dead)


def _table(topic: str) -> str:
    return quote_identifier(topic)


def read_figures(conn: sqlite3.Connection, path: str | Path, stages: list[str], *, now_ms: int) -> LedgerFigures:
    """Every figure of the ledger at ``path`` (open on ``conn``; call inside one read transaction).

    Args:
        stages: the stages to report (a pipeline's, plus those of the run log).
        now_ms: the time leases are measured against (milliseconds since the epoch).
    """
    sizes = file_sizes(path)
    topics = topic_names(conn)
    consumers = []
    for cid, topic, name in conn.execute("SELECT id, topic, name FROM _minikafka_consumers ORDER BY topic, id"):
        if topic in topics:
            consumers.append((cid, topic, name))
    queue_rows = []
    for topic, consumer in queues.queue_pairs(conn):
        cid = queues.consumer_id(conn, topic, consumer)
        if cid is not None and topic in topics:
            queue_rows.append(_queue_figures(conn, topic, consumer, cid, now_ms))
    backup = conn.execute(
        "SELECT coalesce(finished_at, started_at) FROM _minikafka_runs WHERE stage = 'backup' AND kind = 'backup' "
        "AND status = 'succeeded' ORDER BY started_at DESC, rowid DESC LIMIT 1").fetchone()
    return LedgerFigures(
        str(path), sizes[0], sizes[1],
        stages=[stage_figures(conn, s) for s in stages],
        topics=[_topic_figures(conn, t) for t in topics],
        consumers=[ConsumerFigures(t, n, sum(counts.pending_counts(conn, t, cid).values()))
                   for cid, t, n in consumers],
        queues=queue_rows,
        quarantined=dict(conn.execute("SELECT topic, count(*) FROM _minikafka_quarantine GROUP BY topic")),
        last_backup=epoch(backup[0]) if backup else None,
        quarantined_ever=quarantined_ever(conn))


def _topic_figures(conn: sqlite3.Connection, topic: str) -> TopicFigures:
    table = TopicTable(conn, read_layout(conn, topic))
    top = table.high_watermark()
    newest = table.row(top) if top else None
    return TopicFigures(topic, counts.total_rows(conn, topic), epoch(newest[CREATED_AT]) if newest else None, top)


def file_sizes(path: str | Path) -> tuple[int, int]:
    """(ledger file bytes, -wal file bytes), 0 for a file that is not there."""
    file = Path(path)
    wal = file.with_name(file.name + "-wal")
    return (os.stat(file).st_size if file.is_file() else 0, os.stat(wal).st_size if wal.is_file() else 0)

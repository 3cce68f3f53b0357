"""Retention of the run log and of the quality reports written beside the ledger.

Topics are append-only and never pruned here; only the bookkeeping that grows with
every run is: old rows of ``_minikafka_runs`` (with the OpenLineage notes of the runs
deleted, ``lineage_log``) and old HTML reports. Ages are read with
``util.duration.parse_timedelta`` (the one duration grammar: 30d, 12h, 2w, 90m, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ...util.clock import format_timestamp
from ...util.results import Result
from . import lineage_log
from .runlog import dead_running_runs, mark_gone_in_current_transaction

REPORT_DIR = "quality-reports"


def cutoff(age: timedelta, now: datetime | None = None) -> str:
    """The ledger timestamp ``age`` before ``now`` (default: the current time)."""
    return format_timestamp((now or datetime.now(timezone.utc)) - age)


def report_dir(ledger_path: str) -> Path:
    """Where stages write their quality reports: ``quality-reports/`` beside the ledger."""
    return Path(ledger_path).resolve().parent / REPORT_DIR


@dataclass
class PruneResult(Result):
    runs_deleted: int = 0
    reports_deleted: int = 0
    kept_latest: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"deleted {self.runs_deleted} run(s) and {self.reports_deleted} report(s); "
                f"kept {len(self.kept_latest)} run(s) as their stage's latest")


def prune_runs_in_current_transaction(conn, before: str) -> tuple[int, list[str]]:
    """Delete finished runs started before ``before``; the latest run of each stage stays.

    Keeping each stage's latest run means ``status`` can still say when a stage last
    ran, however long ago. Runs still 'running' are never deleted; a 'running' row whose
    process is gone (``runlog.settled``) is first recorded as interrupted, then pruned like any.
    The OpenLineage notes of the runs deleted go with them (``lineage_log.prune_in_current_transaction``).
    Returns (rows deleted, run ids kept only because they are a stage's latest).
    """
    gone = [r for r in dead_running_runs(conn) if r["started_at"] < before]
    mark_gone_in_current_transaction(conn, gone, "prune")
    latest = "SELECT run_id FROM (SELECT run_id, row_number() OVER (PARTITION BY coalesce(stage, kind) " \
             "ORDER BY started_at DESC, rowid DESC) AS n FROM _minikafka_runs) WHERE n = 1"
    kept = [r[0] for r in conn.execute(
        f"SELECT run_id FROM _minikafka_runs WHERE started_at < ? AND run_id IN ({latest})", (before,))]
    deleted = conn.execute(
        f"DELETE FROM _minikafka_runs WHERE started_at < ? AND status != 'running' AND run_id NOT IN ({latest})",
        (before,),
    ).rowcount
    lineage_log.prune_in_current_transaction(conn, before)
    return deleted, kept


def prune_reports(directory: Path, before: datetime, *, dry_run: bool = False) -> int:
    """Delete ``*.html`` reports in ``directory`` last modified before ``before``; returns how many."""
    if not directory.is_dir():
        return 0
    limit = before.timestamp()
    n = 0
    for path in directory.glob("*.html"):
        if path.is_file() and path.stat().st_mtime < limit:
            if not dry_run:
                path.unlink()
            n += 1
    return n

"""The run log: one row per run of anything (pipeline, stage, backfill).

A run's error, details and quality results are masked before they are kept
(``util.redact``): a URL password, a token or a value named like a secret in an error
never reaches the ledger."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ...util.clock import utc_now
from ...util.redact import redact_secrets, redact_value
from ...util.results import Result
from ...util.signals import Terminated


def new_run_id(prefix: str = "run") -> str:
    """A sortable, unique run id: ``<prefix>-YYYYmmddTHHMMSSZ-<8 hex>``."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}-{stamp}-{uuid.uuid4().hex[:8]}"


@dataclass
class RunResult(Result):
    """What one run did; mirrors its row in ``_minikafka_runs``."""

    run_id: str
    kind: str
    stage: str | None = None
    consumer: str | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    watermarks: dict[str, int] = field(default_factory=dict)
    rows_in: int = 0
    rows_out: int = 0
    rows_duplicate: int = 0
    rows_failed: int = 0
    rows_quarantined: int = 0
    status: str = "running"
    error: str | None = None
    started_at: str = field(default_factory=utc_now)
    finished_at: str | None = None
    duration_s: float | None = None
    quality: Any = None
    details: dict[str, Any] | None = None
    _t0: float = field(default_factory=time.perf_counter, repr=False)

    def finish(self, status: str, error: str | None = None) -> RunResult:
        self.status = status
        self.error = None if error is None else redact_secrets(error)
        self.finished_at = utc_now()
        self.duration_s = round(time.perf_counter() - self._t0, 6)
        return self

    def summary(self) -> str:
        """``<stage or kind> <status>: in N, out N, duplicates N, quarantined N (run id, seconds)``."""
        took = f", {self.duration_s:.2f} s" if self.duration_s is not None else ""
        text = (f"{self.stage or self.kind} {self.status}: in {self.rows_in}, out {self.rows_out}, "
                f"duplicates {self.rows_duplicate}, failed {self.rows_failed}, quarantined {self.rows_quarantined} "
                f"({self.run_id}{took})")
        return text + (f": {self.error}" if self.error else "")

    def as_row(self) -> dict[str, Any]:
        """The row as the ledger keeps it: JSON columns as text, every text masked (``util.redact``)."""
        return {
            "run_id": self.run_id, "kind": self.kind, "stage": self.stage, "consumer": self.consumer,
            "inputs": json.dumps(self.inputs), "outputs": json.dumps(self.outputs),
            "watermarks": json.dumps(self.watermarks), "rows_in": self.rows_in,
            "rows_out": self.rows_out, "rows_duplicate": self.rows_duplicate,
            "rows_failed": self.rows_failed, "rows_quarantined": self.rows_quarantined,
            "status": self.status, "error": None if self.error is None else redact_secrets(self.error),
            "started_at": self.started_at,
            "finished_at": self.finished_at, "duration_s": self.duration_s,
            "quality": None if self.quality is None else json.dumps(redact_value(self.quality), default=str),
            "details": None if self.details is None else json.dumps(redact_value(self.details), default=str),
        }


COLUMNS = list(RunResult("x", "x").as_row())
STATUSES = ("running", "succeeded", "failed", "partial", "interrupted")
INTERRUPTED = "interrupted by Ctrl-C (SIGINT)"
TERMINATED = "stopped by SIGTERM"


def interruption(exc: BaseException | None = None) -> str:
    """The error recorded for a run an interrupt stopped: :data:`TERMINATED` for SIGTERM
    (``util.signals.Terminated``), else :data:`INTERRUPTED`."""
    return TERMINATED if isinstance(exc, Terminated) else INTERRUPTED


def mark_interrupted_in_current_transaction(conn: sqlite3.Connection, run_ids: list[str]) -> None:
    """Record that Ctrl-C stopped these finished runs: status 'interrupted' (a failed run stays
    failed), their counts and details unchanged."""
    conn.executemany(
        "UPDATE _minikafka_runs SET status = 'interrupted', error = coalesce(error, ?) "
        "WHERE run_id = ? AND status IN ('running', 'succeeded', 'partial')",
        [(INTERRUPTED, run_id) for run_id in run_ids])


def failure_status(exc: BaseException) -> str:
    """The status of a run that ``exc`` ended: 'interrupted' for Ctrl-C (KeyboardInterrupt), else 'failed'."""
    return "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"


def write_run_in_current_transaction(conn: sqlite3.Connection, result: RunResult) -> None:
    """Insert or replace the run's row (inside the caller's transaction)."""
    row = result.as_row()
    cols = ", ".join(COLUMNS)
    marks = ", ".join("?" for _ in COLUMNS)
    conn.execute(f"INSERT OR REPLACE INTO _minikafka_runs ({cols}) VALUES ({marks})", tuple(row.values()))


def insert_run_unless_present_in_current_transaction(conn: sqlite3.Connection, result: RunResult) -> bool:
    """Insert the run's row unless a row with its run id exists (inside the caller's
    transaction); True when it was inserted. A run id has one row, whoever comes first."""
    row = result.as_row()
    cols = ", ".join(COLUMNS)
    marks = ", ".join("?" for _ in COLUMNS)
    cur = conn.execute(f"INSERT OR IGNORE INTO _minikafka_runs ({cols}) VALUES ({marks})", tuple(row.values()))
    return cur.rowcount == 1


def read_runs(conn: sqlite3.Connection, *, stage: str | None = None, run_id: str | None = None,
              limit: int = 20, hide_kinds: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Most recent runs first (or the one run ``run_id``), as dicts with JSON columns decoded;
    without ``stage``, runs of ``hide_kinds`` are left out."""
    if run_id is not None:
        where, params = "WHERE run_id = ?", (run_id,)
    elif stage:
        where, params = "WHERE stage = ?", (stage,)
    elif hide_kinds:
        where, params = f"WHERE kind NOT IN ({', '.join('?' for _ in hide_kinds)})", tuple(hide_kinds)
    else:
        where, params = "", ()
    cur = conn.execute(
        f"SELECT {', '.join(COLUMNS)} FROM _minikafka_runs {where} ORDER BY started_at DESC, rowid DESC LIMIT ?",
        (*params, limit),
    )
    return [decoded(dict(zip(COLUMNS, values))) for values in cur.fetchall()]


def decoded(row: dict[str, Any]) -> dict[str, Any]:
    """A run row with its JSON columns as values (as ``read_runs`` gives it; ``RunResult.as_row``
    holds them as text)."""
    for key in ("inputs", "outputs", "watermarks", "quality", "details"):
        if isinstance(row.get(key), str):
            row[key] = json.loads(row[key])
    return row


def failed_run_ids(conn: sqlite3.Connection, *, stage: str | None = None, limit: int = 20) -> list[str]:
    """Ids of the failed, interrupted or partial runs (of ``stage``), most recent first."""
    where, params = "status IN ('failed', 'partial', 'interrupted')", []
    if stage:
        where += " AND stage = ?"
        params.append(stage)
    return [r[0] for r in conn.execute(
        f"SELECT run_id FROM _minikafka_runs WHERE {where} ORDER BY started_at DESC, rowid DESC LIMIT ?",
        (*params, limit))]


def run_exists(conn: sqlite3.Connection, run_id: str) -> bool:
    return conn.execute("SELECT 1 FROM _minikafka_runs WHERE run_id = ?", (run_id,)).fetchone() is not None


def run_ids_beginning(conn: sqlite3.Connection, prefix: str) -> list[str]:
    """Run ids that begin with ``prefix``, most recent first."""
    return [r[0] for r in conn.execute(
        "SELECT run_id FROM _minikafka_runs WHERE substr(run_id, 1, ?) = ? ORDER BY started_at DESC, rowid DESC",
        (len(prefix), prefix))]


def quarantined_everything(run: dict[str, Any]) -> bool:
    """The run read rows and every row it produced went to the quarantine (nothing committed,
    nothing left pending to retry)."""
    return bool(run.get("rows_in") and run.get("rows_quarantined") and not run.get("rows_out")
                and not run.get("rows_failed"))


def quarantine_topics(conn: sqlite3.Connection, run_id: str) -> list[str]:
    """The topics whose quarantine holds rows of run ``run_id`` (an expectation quarantines
    output rows under the output topic; a row failing ``max_attempts`` times under its input)."""
    rows = conn.execute("SELECT DISTINCT topic FROM _minikafka_quarantine WHERE run_id = ? ORDER BY topic",
                        (run_id,)).fetchall()
    return [r[0] for r in rows]


def find_runs(conn: sqlite3.Connection, *, stage: str | None = None, status: str | None = None,
              since: str | None = None, until: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Runs matching every filter given, most recent first (JSON columns decoded).

    Args:
        stage: the stage (or, for runs of no stage, the kind: ``pipeline``, ``backfill``, ``console``...).
        status: one of ``STATUSES``.
        since, until: ISO 8601 texts compared with ``started_at`` (``since`` inclusive, ``until`` exclusive).
    """
    where, params = ["1"], []
    for condition, value in (("coalesce(stage, kind) = ?", stage), ("status = ?", status),
                             ("started_at >= ?", since), ("started_at < ?", until)):
        if value:
            where.append(condition)
            params.append(value)
    ids = [r[0] for r in conn.execute(
        f"SELECT run_id FROM _minikafka_runs WHERE {' AND '.join(where)} ORDER BY started_at DESC, rowid DESC LIMIT ?",
        (*params, limit))]
    return [read_runs(conn, run_id=i, limit=1)[0] for i in ids]


def run_names(conn: sqlite3.Connection) -> list[str]:
    """Every stage (or kind, for runs of no stage) in the run log, sorted."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT coalesce(stage, kind) FROM _minikafka_runs ORDER BY 1")]


MAINTENANCE_KINDS = ("health", "backup", "restore")  # runs about the ledger, not of the pipeline


def last_committed_run(conn: sqlite3.Connection) -> str | None:
    """The id of the run whose row was written last and is finished (not 'running'), leaving
    out the ledger's own maintenance runs (health, backup, restore); None without one.

    A run's row is rewritten when it finishes (``INSERT OR REPLACE`` gives it a new rowid),
    so the highest rowid is the latest write: this reads backwards from the end of the table.
    """
    marks = ", ".join("?" for _ in MAINTENANCE_KINDS)
    row = conn.execute(
        f"SELECT run_id FROM _minikafka_runs WHERE status != 'running' AND kind NOT IN ({marks}) "
        "ORDER BY rowid DESC LIMIT 1", MAINTENANCE_KINDS).fetchone()
    return None if row is None else row[0]


def run_started_at(conn: sqlite3.Connection, run_id: str) -> str | None:
    """When run ``run_id`` started (ledger text form), or None when the run log has no such run."""
    row = conn.execute("SELECT started_at FROM _minikafka_runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else row[0]

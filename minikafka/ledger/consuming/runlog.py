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
from ...util.liveness import process_state, this_process
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
    _lock: str | None = field(default=None, repr=False)  # the lock file the run holds to its end, if any

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
        """The row as the ledger keeps it: JSON columns as text, every text masked (``util.redact``).

        A 'running' row names the process writing it in its details (``process``: pid, host,
        start time, and the run's lock file when it holds one), so a reader can tell a run in
        progress from one whose process is gone (``settled``); the finished row does not."""
        details = self.details
        if self.status == "running":
            details = {**(details or {}), "process": {**this_process(), **({"lock": self._lock} if self._lock else {})}}
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
            "details": None if details is None else json.dumps(redact_value(details), default=str),
        }


COLUMNS = list(RunResult("x", "x").as_row())
STATUSES = ("running", "succeeded", "failed", "partial", "interrupted")
# what a reader shows: a 'running' row of another host whose process nothing here can check
# (no lock of its run tells) reads as 'unknown' (``settled``); the ledger never stores it
SHOWN_STATUSES = (*STATUSES, "unknown")
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
    transaction); True when it was inserted. A run id has one outcome, whoever comes first: a
    row still 'running' (written when the run started) is no outcome and is replaced."""
    row = result.as_row()
    cols = ", ".join(COLUMNS)
    marks = ", ".join("?" for _ in COLUMNS)
    conn.execute("DELETE FROM _minikafka_runs WHERE run_id = ? AND status = 'running'", (result.run_id,))
    cur = conn.execute(f"INSERT OR IGNORE INTO _minikafka_runs ({cols}) VALUES ({marks})", tuple(row.values()))
    return cur.rowcount == 1


LIVE_RUNS = 50  # 'running' rows a filtered read looks past (a run in progress is not 'interrupted')


def _process_of(row: dict[str, Any]) -> dict[str, Any] | None:
    details = row.get("details")
    if isinstance(details, str):
        try:
            details = json.loads(details)
        except ValueError:
            return None
    process = details.get("process") if isinstance(details, dict) else None
    return process if isinstance(process, dict) else None


def gone_error(process: dict[str, Any]) -> str:
    """The error an interrupted run is shown (then recorded) with: its process is gone."""
    return (f"its process (pid {process.get('pid')} on {process.get('host')}) is gone: killed by SIGKILL "
            "or the OOM killer, crashed, or its machine restarted")


def liveness(row: dict[str, Any]) -> str | None:
    """For a 'running' row: ``alive``, ``gone`` or ``unknown`` (``util.liveness.process_state``
    of the process its details name); None for a finished row or one that names no process
    (written by an older minikafka: shown as it is)."""
    if row.get("status") != "running":
        return None
    process = _process_of(row)
    if process is None:
        return None
    return process_state(process, process.get("lock"), row.get("run_id"))


def settled(row: dict[str, Any]) -> dict[str, Any]:
    """The row as readers show it: a 'running' row whose process is gone is 'interrupted' (its
    error says so), one of another host that nothing here can check is 'unknown'; any other
    row unchanged. Reading changes nothing in the ledger (the stage's next run records it)."""
    state = liveness(row)
    if state == "gone":
        row["status"], row["error"] = "interrupted", gone_error(_process_of(row) or {})
    elif state == "unknown":
        row["status"] = "unknown"
    return row


FINAL_STATUSES = ("succeeded", "failed", "partial", "interrupted")  # how a run can end


def stage_run_counts(conn: sqlite3.Connection, stage: str) -> dict[str, int]:
    """How many of the stage's runs the run log holds by final status (every one of
    ``FINAL_STATUSES``, 0 included). A 'running' row whose process is gone counts as interrupted
    (``settled``); one still running, or of another host (unknown), counts nowhere yet. Reads the
    stage's rows through the ``(stage, started_at)`` index; pruning the run log lowers them."""
    counts = dict.fromkeys(FINAL_STATUSES, 0)
    for status, n in conn.execute("SELECT status, count(*) FROM _minikafka_runs WHERE stage = ? AND kind = 'stage' "
                                  "AND status != 'running' GROUP BY status", (stage,)):
        counts[status] = counts.get(status, 0) + n
    cur = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM _minikafka_runs WHERE stage = ? AND kind = 'stage' "
                       "AND status = 'running'", (stage,))
    for values in cur:
        if settled(dict(zip(COLUMNS, values)))["status"] == "interrupted":
            counts["interrupted"] += 1
    return counts


def dead_running_runs(conn: sqlite3.Connection, *, stage: str | None = None, kind: str | None = None,
                      holding_lock: bool = False) -> list[dict[str, Any]]:
    """The 'running' rows (of ``stage``, of ``kind``) whose process is gone, oldest first.

    ``holding_lock``: the caller holds the lock every run of ``stage`` takes, so no other run
    of it is in progress: each of its 'running' rows is dead, wherever it ran."""
    where, params = ["status = 'running'"], []
    for condition, value in (("stage = ?", stage), ("kind = ?", kind)):
        if value is not None:
            where.append(condition)
            params.append(value)
    rows = [decoded(dict(zip(COLUMNS, values))) for values in conn.execute(
        f"SELECT {', '.join(COLUMNS)} FROM _minikafka_runs WHERE {' AND '.join(where)} "
        "ORDER BY started_at, rowid", params)]
    return rows if holding_lock else [r for r in rows if liveness(r) == "gone"]


def mark_gone_in_current_transaction(conn: sqlite3.Connection, rows: list[dict[str, Any]], by_run: str) -> None:
    """Record that the runs of ``rows`` ('running' rows whose process is gone) were
    interrupted: status 'interrupted', their error saying so, ``details.noticed_by`` naming the
    run that found them; counts unchanged (nothing of such a run was committed)."""
    for row in rows:
        details = dict(row.get("details") or {})
        details["noticed_by"] = by_run
        conn.execute(
            "UPDATE _minikafka_runs SET status = 'interrupted', error = coalesce(error, ?), details = ? "
            "WHERE run_id = ? AND status = 'running'",
            (gone_error(details.get("process") or {}), json.dumps(redact_value(details), default=str),
             row["run_id"]))


def start_run_in_current_transaction(conn: sqlite3.Connection, run: RunResult, lock: str | None = None,
                                     *, holding_lock: bool = False) -> list[dict[str, Any]]:
    """Write ``run``'s 'running' row (inside the caller's small transaction, before the run's
    work: a run killed from then on shows as interrupted), naming its process and ``lock`` (the
    file it holds to its end, if any). Earlier 'running' rows of its stage and kind whose
    process is gone (all of them with ``holding_lock``: the caller holds the lock every run of
    the stage takes) are recorded as interrupted, and ``run.details["resumes_after"]`` names
    them. Returns those rows (``resume_note`` words them), oldest first.

    The run's final row replaces this one inside its commit's transaction."""
    run._lock = lock
    dead = dead_running_runs(conn, stage=run.stage, kind=run.kind, holding_lock=holding_lock)
    if dead:
        mark_gone_in_current_transaction(conn, dead, run.run_id)
        run.details = {**(run.details or {}), "resumes_after": [r["run_id"] for r in dead]}
    write_run_in_current_transaction(conn, run)
    return dead


def resume_note(rows: list[dict[str, Any]]) -> str:
    """The one line a run prints when it resumes after interrupted runs of its stage."""
    last = rows[-1]
    process = (last.get("details") or {}).get("process") or {}
    more = f" (and {len(rows) - 1} earlier)" if len(rows) > 1 else ""
    return (f"{last.get('stage') or last.get('kind')}: resuming after interrupted run {last['run_id']}{more}, "
            f"started {last['started_at']} (pid {process.get('pid')} on {process.get('host')}, gone); "
            "nothing of it was committed")


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
    return [settled(decoded(dict(zip(COLUMNS, values)))) for values in cur.fetchall()]


def decoded(row: dict[str, Any]) -> dict[str, Any]:
    """A run row with its JSON columns as values (as ``read_runs`` gives it; ``RunResult.as_row``
    holds them as text)."""
    for key in ("inputs", "outputs", "watermarks", "quality", "details"):
        if isinstance(row.get(key), str):
            row[key] = json.loads(row[key])
    return row


def failed_run_ids(conn: sqlite3.Connection, *, stage: str | None = None, limit: int = 20) -> list[str]:
    """Ids of the failed, interrupted or partial runs (of ``stage``), most recent first; a
    'running' run whose process is gone is an interrupted one (``settled``)."""
    where, params = "status IN ('failed', 'partial', 'interrupted', 'running')", []
    if stage:
        where += " AND stage = ?"
        params.append(stage)
    found = []
    cur = conn.execute(f"SELECT run_id, status, details FROM _minikafka_runs WHERE {where} "
                       "ORDER BY started_at DESC, rowid DESC LIMIT ?", (*params, limit + LIVE_RUNS))
    for run_id, status, details in cur:
        if status != "running" or liveness({"run_id": run_id, "status": status, "details": details}) == "gone":
            found.append(run_id)
            if len(found) >= limit:
                break
    return found


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
        status: one of ``SHOWN_STATUSES``, as readers show it (``settled``).
        since, until: ISO 8601 texts compared with ``started_at`` (``since`` inclusive, ``until`` exclusive).
    """
    where, params = ["1"], []
    stored = ("running", "interrupted") if status in ("running", "interrupted", "unknown") else status
    for condition, value in (("coalesce(stage, kind) = ?", stage), ("started_at >= ?", since),
                             ("started_at < ?", until)):
        if value:
            where.append(condition)
            params.append(value)
    if stored:
        stored = (stored,) if isinstance(stored, str) else stored
        where.append(f"status IN ({', '.join('?' for _ in stored)})")
        params.extend(stored)
    found = []
    extra = LIVE_RUNS if status in ("running", "interrupted", "unknown") else 0
    cur = conn.execute(f"SELECT run_id FROM _minikafka_runs WHERE {' AND '.join(where)} "
                       "ORDER BY started_at DESC, rowid DESC LIMIT ?", (*params, limit + extra))
    for (run_id,) in cur.fetchall():
        row = read_runs(conn, run_id=run_id, limit=1)[0]  # settled: a dead 'running' row reads 'interrupted'
        if status is None or row["status"] == status:
            found.append(row)
            if len(found) >= limit:
                break
    return found


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

"""Which stage runs had their OpenLineage START sent, by which process, and which terminal event
followed (``_minikafka_lineage``).

A START is noted before it is sent, the terminal event (COMPLETE, FAIL, ABORT) after: a
process killed between the two leaves a row with ``ended`` NULL, which the next run of the
pipeline finds (``open_runs``) and finishes with a FAIL, once the process that sent the START
is gone. A terminal event can thus be sent twice (killed after sending, before noting),
never not at all: OpenLineage consumers keep the last event of a run id.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

ENDINGS = ("COMPLETE", "FAIL", "ABORT")


@dataclass(frozen=True)
class OpenRun:
    """A run whose START was sent and no terminal event yet."""

    run_id: str
    pipeline: str
    stage: str
    started_at: str
    host: str
    pid: int
    proc_start: int | None


def note_start_in_current_transaction(conn: sqlite3.Connection, run: OpenRun) -> None:
    """Note that the START of ``run`` is about to be sent (a run id is noted once)."""
    conn.execute(
        "INSERT OR IGNORE INTO _minikafka_lineage (run_id, pipeline, stage, started_at, host, pid, proc_start) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (run.run_id, run.pipeline, run.stage, run.started_at, run.host, run.pid, run.proc_start))


def note_end_in_current_transaction(conn: sqlite3.Connection, run_id: str, ending: str) -> None:
    """Note the terminal event sent for ``run_id``."""
    if ending not in ENDINGS:
        raise ValueError(f"a run ends with one of {ENDINGS}, not {ending!r}")
    conn.execute("UPDATE _minikafka_lineage SET ended = ? WHERE run_id = ?", (ending, run_id))


def open_runs(conn: sqlite3.Connection, pipeline: str) -> list[OpenRun]:
    """The runs of ``pipeline`` with a START and no terminal event, oldest first."""
    rows = conn.execute(
        "SELECT run_id, pipeline, stage, started_at, host, pid, proc_start FROM _minikafka_lineage "
        "WHERE pipeline = ? AND ended IS NULL ORDER BY started_at, run_id", (pipeline,)).fetchall()
    return [OpenRun(*row) for row in rows]


def ending_of(conn: sqlite3.Connection, run_id: str) -> str | None:
    """The terminal event noted for ``run_id`` (None: none yet, or no START noted)."""
    row = conn.execute("SELECT ended FROM _minikafka_lineage WHERE run_id = ?", (run_id,)).fetchone()
    return row[0] if row else None

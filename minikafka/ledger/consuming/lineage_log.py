"""Which stage runs had their OpenLineage START sent, by which process, and which terminal event
followed (``_minikafka_lineage``).

A START is noted before it is sent, the terminal event (COMPLETE, FAIL, ABORT) after: a
process killed between the two leaves a row with ``ended`` NULL, which the next run of the
pipeline finds (``open_runs``) and finishes with a FAIL, once the process that sent the START
is gone. A terminal event can thus be sent twice (killed after sending, before noting),
never not at all: OpenLineage consumers keep the last event of a run id.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

ENDINGS = ("COMPLETE", "FAIL", "ABORT")


@dataclass(frozen=True)
class OpenRun:
    """A run whose START was sent and no terminal event yet."""

    run_id: str
    pipeline: str
    stage: str
    started_at: str
    process: dict[str, Any]  # util.liveness.this_process() of the process that sent the START


def note_start_in_current_transaction(conn: sqlite3.Connection, run: OpenRun) -> None:
    """Note that the START of ``run`` is about to be sent (a run id is noted once)."""
    conn.execute(
        "INSERT OR IGNORE INTO _minikafka_lineage (run_id, pipeline, stage, started_at, process) VALUES (?, ?, ?, ?, ?)",
        (run.run_id, run.pipeline, run.stage, run.started_at, json.dumps(run.process, sort_keys=True)))


def note_end_in_current_transaction(conn: sqlite3.Connection, run_id: str, ending: str) -> None:
    """Note the terminal event sent for ``run_id``."""
    if ending not in ENDINGS:
        raise ValueError(f"a run ends with one of {ENDINGS}, not {ending!r}")
    conn.execute("UPDATE _minikafka_lineage SET ended = ? WHERE run_id = ?", (ending, run_id))


def open_runs(conn: sqlite3.Connection, pipeline: str) -> list[OpenRun]:
    """The runs of ``pipeline`` with a START and no terminal event, oldest first."""
    rows = conn.execute(
        "SELECT run_id, pipeline, stage, started_at, process FROM _minikafka_lineage "
        "WHERE pipeline = ? AND ended IS NULL ORDER BY started_at, run_id", (pipeline,)).fetchall()
    return [OpenRun(*row[:4], json.loads(row[4])) for row in rows]


def ending_of(conn: sqlite3.Connection, run_id: str) -> str | None:
    """The terminal event noted for ``run_id`` (None: none yet, or no START noted)."""
    row = conn.execute("SELECT ended FROM _minikafka_lineage WHERE run_id = ?", (run_id,)).fetchone()
    return row[0] if row else None


def prune_in_current_transaction(conn: sqlite3.Connection, before: str) -> int:
    """Delete the notes of runs started before ``before`` whose ending was sent and whose run-log
    row is gone (pruned with the run log: ``runlog_retention``); returns how many. A START with
    no ending stays until the next run of its pipeline sends one."""
    return conn.execute(
        "DELETE FROM _minikafka_lineage WHERE started_at < ? AND ended IS NOT NULL "
        "AND run_id NOT IN (SELECT run_id FROM _minikafka_runs)", (before,)).rowcount

"""The run log's rows for what a stage's own commit never wrote: a launch that failed, Ctrl-C.

A stage writes its own run row when it commits or fails inside ``run_stage``. Everything that
stops it earlier (no master, no JVM, spark-submit that did not start, the job failing before
the stage, Ctrl-C) is written here, keyed by the run id the scheduler gave the stage, so every
stage started leaves exactly one row.
"""

from __future__ import annotations

import contextlib

from ..api.source import Source
from ..ledger.consuming import (
    INTERRUPTED,
    RunResult,
    insert_run_unless_present_in_current_transaction,
    quarantine_topics,
    quarantined_everything,
    write_run_in_current_transaction,
)
from .definition import PipelineDefinition, StageDefinition
from .opening import run_row
from .results import StageOutcome


def record_failed_run(defn: PipelineDefinition, run_id: str, error: str, sd: StageDefinition | None = None,
                      details: dict | None = None, status: str = "failed", keep: bool = False) -> dict | None:
    """Write a failed (or ``status`` 'interrupted') run that never reached the stage's own
    commit (master unreachable, spark-submit did not launch, the job failed before running
    the stage, Ctrl-C); return its row.

    Without ``sd`` the row is the pipeline's (kind 'pipeline'). ``keep``: a row the run
    already has (written by the stage itself) stays as it is. A ledger that cannot take
    the row does not hide the failure itself: None comes back.
    """
    run = RunResult(run_id, "stage" if sd else "pipeline", stage=sd.name if sd else None,
                    consumer=sd.consumer if sd else None, inputs=list(sd.inputs) if sd else [],
                    outputs=list(sd.outputs) if sd else [], details=details)
    run.finish(status, error)
    try:
        with Source(str(defn.source)) as source:
            with source.ledger.atomic() as conn:
                if keep:
                    insert_run_unless_present_in_current_transaction(conn, run)
                else:
                    write_run_in_current_transaction(conn, run)
            return run_row(source, run_id)
    except Exception:  # noqa: BLE001 - the original failure matters more than its log row
        return None


def record_interrupted(defn: PipelineDefinition, sd: StageDefinition, run_id: str, phase: str = "start", *,
                       error: str = INTERRUPTED) -> None:
    """After Ctrl-C (or SIGTERM: ``error`` says which), once no process of the run can write
    any more: an 'interrupted' row for the stage's run ``run_id``, unless that run wrote its
    own (the stage's handler, its commit just before, its failure). Keyed by the run id, in
    one transaction: the only writer of a run's 'interrupted' row in a pipeline run."""
    record_failed_run(defn, run_id, error, sd, details={"phase": phase}, status="interrupted", keep=True)


def note_quarantine(defn: PipelineDefinition, outcome: StageOutcome, source: Source | None = None) -> None:
    """Name the quarantine a run sent every row to (the run table says so)."""
    if outcome.run and outcome.run.get("run_id") and quarantined_everything(outcome.run):
        with contextlib.nullcontext(source) if source is not None else Source(str(defn.source)) as opened:
            outcome.quarantined_to = quarantine_topics(opened.ledger.conn, outcome.run["run_id"]) or \
                list(outcome.run.get("inputs") or [])[:1]

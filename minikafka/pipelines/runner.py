"""The scheduler of a pipeline run: which stage runs next, never how a stage starts.

dagster's run coordinator: ``run_pipeline`` opens the ledger once (every topic checked, every
consumer registered), asks each stage what it has pending, and starts each stage once every
selected stage that writes one of its inputs has ended, at most the launcher's ``width`` at
once, skipping what a failure blocks (``strict``: everything after it; ``best_effort``: what is
downstream of it). How a stage starts (in this process, spark-submit, a client of the warm
engine) is the launcher's (``pipelines.launch``); what it returns is ``results``; the run log's
rows for what a stage never wrote itself are ``failures``.
"""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from ..ledger.consuming import INTERRUPTED, interruption, new_run_id
from ..util.progress import heartbeat
from .definition import PipelineDefinition, StageDefinition, has_upstream, select_stages
from .failures import note_quarantine, record_interrupted
from .launch import Children, Launcher, open_launcher, run_in_process, sweep_staging
from .lineage import Lineage
from .opening import has_pending, open_source, pending_in, register_stage_consumers, require_ledger, stage_ids
from .options import RunOptions
from .results import PipelineRun, StageOutcome

HEARTBEAT_S = float(os.environ.get("MINIKAFKA_HEARTBEAT_S", "15"))


def run_pipeline(defn: PipelineDefinition, options: RunOptions | None = None, *, echo=print, running=None,
                 stage_host=None, **given) -> PipelineRun:
    """Run the selected stages in DAG order, as ``options`` say (or the ``RunOptions`` fields
    ``given`` as keywords: ``run_pipeline(defn, stage="x", dry_run=True)``).

    strict: after a failure no further stage starts (stages already running finish).
    best_effort: every stage not downstream of a failure runs; failures are reported at the end.

    Where stages run: ``in_process``: all in this process, one Spark application.
    Otherwise each stage is its own process with its own run row and exit status:
    ``engine="submit"``: one spark-submit per stage; ``"connect"``: a client of the warm
    engine at ``remote`` (default: the pipeline's ``[engine] remote``, else the engine
    ``minikafka serve`` recorded for this pipeline); ``"auto"`` (the default, as for the CLI's
    ``run``; ``$MINIKAFKA_ENGINE`` changes both): as connect, and when no engine runs, one is
    started that stops after ``idle_timeout`` seconds unused (default: ``[engine] idle_timeout``).
    Stages that do not depend on each other run side by side, at most ``max_parallel`` at once
    (default: 2 on an engine, 1 under spark-submit); the ledger serializes their commits. A DAG
    with nothing new starts no JVM and no engine.

    ``staging``: a URI every node sees (default: the pipeline's ``[spark] staging``);
    needed on a non-local master, see ``minikafka.spark.staging``. On such a master the
    project's code is zipped and shipped to the executors.

    ``backup_before``: a directory: a snapshot of the ledger is taken there (``ledger.files.backups``)
    before the first stage starts, so no stage of this run has committed into it.

    ``stage_host``: a ``launch.stagehost.StageHost`` the caller started early (``prestart_stage_host``):
    the stages on an engine fork from it and the run closes it once they are done; the caller
    closes it too (a run that ends before its stages, or fails, leaves it open).

    ``running(label)``: a context manager shown while a stage runs (the CLI's live spinner);
    default: a "still running" line through ``echo`` after 15 s, 30 s, 1 min, ...

    Ctrl-C (KeyboardInterrupt) stops the run: the stages in flight are recorded as
    'interrupted' in the run log (nothing of them is committed), and the interrupt goes on up.

    Raises:
        PipelineDefinitionError: an option no run takes, or an unknown stage.
        LedgerNotFoundError: the pipeline's ledger does not exist (a run never creates it).
        EngineError: no engine answers at ``remote``, or the one to start did not start.
    """
    if options is not None and given:
        raise TypeError(f"run_pipeline: give RunOptions or keywords, not both ({sorted(given)})")
    opts = (options or RunOptions(**given)).of(defn)
    require_ledger(defn)
    chosen = select_stages(defn, stage=opts.stage, start=opts.start)
    result = PipelineRun(defn.name, dry_run=opts.dry_run)
    if running is None:
        def running(label):
            return heartbeat(echo, label, HEARTBEAT_S)
    t0 = time.perf_counter()
    notes: list[str] = []
    registered: dict[tuple[str, str], int] = {}  # (stage, input) -> its consumer's id, registered once here
    if not opts.dry_run:
        sweep_staging(defn, opts.remote)  # what runs that died staged
    try:
        # this process's one connection to the ledger (stages in this process run on it too)
        with open_source(defn, register=not opts.dry_run, notes=notes, registered=registered) as source:
            try:
                _run_on(source, defn, chosen, opts, result, registered, notes, echo, running, stage_host)
            finally:
                result.seconds = time.perf_counter() - t0
    finally:
        if not opts.dry_run:
            sweep_staging(defn, opts.remote)  # and what a write of one landed after the first sweep
    return result


def _run_on(source, defn: PipelineDefinition, chosen: list[StageDefinition], opts: RunOptions, result: PipelineRun,
            registered: dict[tuple[str, str], int], notes: list[str], echo, running, stage_host) -> None:
    """``run_pipeline`` once the ledger is open (``source``) and the consumers registered."""
    from .retired import retired_messages

    if opts.dry_run:
        notes = register_stage_consumers(source, defn, dry_run=True)
    for line in notes:  # a new stage that starts past rows that exist says so
        echo(line)
    for line in retired_messages(defn, source.ledger.conn):
        echo(line)
    lineage = None if opts.dry_run else Lineage.of(defn, source, echo)
    if lineage is not None:
        lineage.recover()  # the endings of earlier runs whose process was killed
    pending = {sd.name: pending_in(source, defn, sd, registered) for sd in chosen}
    if opts.backup_before and not opts.dry_run:
        from ..ledger.files import backup

        echo(backup(defn.source, opts.backup_before).summary())
    if not any(pending.values()):  # nothing new anywhere: every stage records its empty run, no JVM, no engine
        for sd in chosen:
            echo(_arrow(sd))
            run_id = new_run_id(sd.name)
            _lineage_started(lineage, sd, run_id, opts)
            outcome = run_in_process(None, defn, sd, opts.dry_run, run_id=run_id, source=source,
                                     consumer_ids=stage_ids(registered, sd))
            _lineage_ended(lineage, sd, run_id, outcome)
            result.outcomes.append(outcome)
        return
    with open_launcher(defn, chosen, opts, source=source, registered=registered, pending=pending, echo=echo,
                       stage_host=stage_host) as launcher:
        if opts.in_process:
            run_in_order(defn, chosen, result, opts, launcher, source, registered, echo, running, lineage)
        else:
            launch = _launching(defn, chosen, opts, launcher, pending, running)
            run_scheduled(defn, chosen, result, opts.strategy, launcher.width, launch, opts.dry_run, echo,
                          lineage=lineage, opts=opts)


def _lineage_started(lineage, sd: StageDefinition, run_id: str, opts: RunOptions) -> None:
    if lineage is not None:
        lineage.started(sd, run_id, logical_date=getattr(opts, "logical_date", None))


def _lineage_ended(lineage, sd: StageDefinition, run_id: str, outcome: StageOutcome | None = None) -> None:
    if lineage is not None:
        lineage.ended(sd, run_id, outcome)


def _arrow(sd: StageDefinition) -> str:
    return f"-> {sd.name} ({', '.join(sd.inputs)} -> {', '.join(sd.outputs)})"


class Ready:
    """The DAG-ready set: a stage is ready once every selected stage that writes one of its
    inputs has ended; it is skipped once a failure blocks it (``strict``: any failure;
    ``best_effort``: a failure upstream of it)."""

    def __init__(self, chosen: list[StageDefinition], strategy: str):
        self.strategy = strategy
        self.writers = {sd.name: {o.name for o in chosen if o is not sd and set(o.outputs) & set(sd.inputs)}
                        for sd in chosen}
        self.blocked: set[str] = set()  # topics a failed or skipped stage would have written
        self.failed = False

    def blocks(self, sd: StageDefinition) -> bool:
        return (self.strategy == "strict" and self.failed) or bool(self.blocked & set(sd.inputs))

    def skip(self, sd: StageDefinition) -> StageOutcome:
        self.blocked.update(sd.outputs)
        return StageOutcome(sd.name, "skipped", error="upstream stage failed")

    def is_ready(self, sd: StageDefinition, ended) -> bool:
        return self.writers[sd.name] <= set(ended)

    def ended(self, sd: StageDefinition, outcome: StageOutcome) -> None:
        if outcome.status == "failed":
            self.failed = True
            self.blocked.update(sd.outputs)


def run_in_order(defn: PipelineDefinition, chosen: list[StageDefinition], result: PipelineRun, opts: RunOptions,
                 launcher: Launcher, source, registered: dict[tuple[str, str], int], echo, running,
                 lineage=None) -> None:
    """``--in-process``: every stage in DAG order, one at a time, on the scheduler's ``source``."""
    ready = Ready(chosen, opts.strategy)
    for sd in chosen:
        if ready.blocks(sd):
            result.outcomes.append(ready.skip(sd))
            continue
        run_id = new_run_id(sd.name)  # the stage's one run row, whoever writes it
        _lineage_started(lineage, sd, run_id, opts)
        try:
            echo(_arrow(sd))
            if not pending_in(source, defn, sd, registered):
                # nothing new: record the empty run without starting a JVM
                outcome = run_in_process(None, defn, sd, opts.dry_run, run_id=run_id, source=source,
                                         consumer_ids=stage_ids(registered, sd))
            else:
                with running(sd.name):
                    outcome = launcher.launch(sd, run_id, None)
        except KeyboardInterrupt as exc:
            if not opts.dry_run:
                record_interrupted(defn, sd, run_id, error=interruption(exc))
                _lineage_ended(lineage, sd, run_id)
            raise
        _lineage_ended(lineage, sd, run_id, outcome)
        note_quarantine(defn, outcome, source)
        result.outcomes.append(outcome)
        ready.ended(sd, outcome)


def _launching(defn: PipelineDefinition, chosen: list[StageDefinition], opts: RunOptions, launcher: Launcher,
               pending: dict[str, int], running):
    """What ``run_scheduled`` calls in a stage's thread: the launcher, unless Ctrl-C came first
    or the stage has nothing new (its empty run is recorded without a JVM)."""
    def launch(sd: StageDefinition, run_id: str, procs: Children) -> StageOutcome:
        launcher.starting(sd)
        with procs.launching() as go:
            if not go:  # Ctrl-C came first: the scheduler records the run, nothing starts
                return StageOutcome(sd.name, "interrupted", error=INTERRUPTED)
            # rows found pending before the run stay pending until the stage runs; a stage
            # whose input an upstream stage of this run writes is asked again
            upstream = has_upstream(sd, chosen)
            if (upstream or not pending[sd.name]) and not has_pending(defn, sd):
                return run_in_process(None, defn, sd, opts.dry_run, run_id=run_id)
            with running(sd.name) if launcher.width == 1 else contextlib.nullcontext():
                return launcher.launch(sd, run_id, procs, pending=None if upstream else pending[sd.name])

    return launch


def run_scheduled(defn: PipelineDefinition, chosen: list[StageDefinition], result: PipelineRun, strategy: str,
                  width: int, launch, dry_run: bool, echo, *, lineage=None, opts: RunOptions | None = None) -> None:
    """Start each stage once every selected stage that writes one of its inputs has ended,
    at most ``width`` at once, each by ``launch(sd, run_id, procs)`` in a thread of its own;
    one line per stage as it ends; outcomes in DAG order."""
    ready = Ready(chosen, strategy)
    outcomes: dict[str, StageOutcome] = {}
    waiting = list(chosen)
    in_flight: dict = {}  # future -> (stage, run id)
    procs = Children()  # the stages' running processes (for Ctrl-C)
    started: dict[str, tuple] = {}  # stage -> (stage, run id): started, not yet ended
    pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="minikafka-stage")
    try:
        while waiting or in_flight:
            for sd in list(waiting):
                if ready.blocks(sd):
                    waiting.remove(sd)
                    outcomes[sd.name] = ready.skip(sd)
                    echo(f"   {sd.name}: skipped (upstream stage failed)")
                    continue
                if len(in_flight) >= width or not ready.is_ready(sd, outcomes):
                    continue
                waiting.remove(sd)
                started[sd.name] = (sd, new_run_id(sd.name))  # from here on, Ctrl-C leaves that run a row
                _lineage_started(lineage, sd, started[sd.name][1], opts)
                echo(_arrow(sd))
                in_flight[pool.submit(launch, *started[sd.name], procs)] = started[sd.name]
            if not in_flight:
                break
            done, _ = wait(list(in_flight), timeout=1.0, return_when=FIRST_COMPLETED)
            for future in done:
                sd, run_id = in_flight.pop(future)
                outcome = future.result()
                started.pop(sd.name, None)
                _lineage_ended(lineage, sd, run_id, outcome)
                note_quarantine(defn, outcome)
                outcomes[sd.name] = outcome
                ready.ended(sd, outcome)
                if len(chosen) > 1:
                    r = outcome.run or {}
                    echo(f"   {sd.name}: {outcome.status} in {outcome.seconds:.1f}s "
                         f"(in {r.get('rows_in', 0) or 0}, out {r.get('rows_out', 0) or 0})")
    except KeyboardInterrupt as exc:
        procs.interrupt()  # no stage process starts from now on; those running are killed
        pool.shutdown(wait=True, cancel_futures=True)
        procs.wait_idle()  # a launch the interrupt caught inside submit() is not joined by the pool
        if not dry_run:  # every stage started gets its run's row: the one its process wrote, or this
            for sd, run_id in started.values():
                record_interrupted(defn, sd, run_id, procs.phases.get(sd.name, "start"), error=interruption(exc))
                _lineage_ended(lineage, sd, run_id)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    result.outcomes = [outcomes[sd.name] for sd in chosen if sd.name in outcomes]

"""A Spark stage: read new rows of its inputs, transform, check, stage, commit once."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ...api.source import Source
from ...errors import LedgerError, PipelineError, SchemaMismatchError, StageFailed
from ...ledger.consuming import (
    RunResult,
    failure_status,
    interruption,
    new_run_id,
    resume_note,
    start_run_in_current_transaction,
    write_run_in_current_transaction,
)
from ...ledger.consuming import runlog_retention as retention
from ...ledger.lake import finishers_for as lake_finishers
from ...ledger.topics import TopicLayout, acks, catalog, validate_consumer_name, validate_topic_name
from ...ledger.transactions import Event, InputState, StagedOutput, commit_stage
from ...util.clock import logical_date as logical_date_of
from ...util.faults import checkpoint
from ...util.redact import redact_and_cut
from ...util.strategy import strategy_problem
from ..engine import engine_of, engine_stopped_error, is_connect, master_of
from ..staging import lock_path
from ..types import quote_back, storage_sql_type
from .conform import conform, refused_rows
from .context import StageContext, takes_context
from .follow import V2_COMMITTER, FollowedWrite
from .lookup import read_lookups
from .persisted import Persisted
from .plan import plan_stage
from .read import read_topic
from .rowfn import ERROR, apply_row_function

log = logging.getLogger("minikafka")

_PYTHON_ERROR = re.compile(r"^(?!(org|java|scala|py4j)\.)[A-Za-z_][\w.]*(Error|Exception)(: .*)?$")


def describe(exc: BaseException) -> str:
    """``Type: message``; for a JVM error, the failing task's Java exception, not the stack."""
    text = str(exc)
    if type(exc).__name__ != "Py4JJavaError" and "\tat " not in text:
        return f"{type(exc).__name__}: {text}"
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("at ")]
    for i, line in enumerate(lines):
        if "most recent failure:" in line:  # the task's own error (e.g. the executor cannot open a file)
            found = line.split('most recent failure:', 1)[1].strip()
            if found.endswith("Traceback (most recent call last):"):  # a Python worker's: its last line says what
                python_errors = []
                for later in lines[i + 1:]:  # that traceback ends where the JVM's report goes on
                    if later.startswith(("Driver stacktrace:", "Caused by:")):
                        break
                    if _PYTHON_ERROR.match(later):
                        python_errors.append(later)
                if python_errors:
                    found = f"{found.removesuffix('Traceback (most recent call last):').rstrip()} {python_errors[-1]}"
            return f"{type(exc).__name__}: {redact_and_cut(found, 1500)}"
    causes = [line for line in lines if line.startswith("Caused by:")]
    return f"{type(exc).__name__}: " + redact_and_cut(causes[-1] if causes else (lines[0] if lines else text), 1500)


@dataclass
class Stage:
    """One step of a pipeline.

    Args:
        name: the stage name (also its consumer name unless ``consumer`` is given).
        inputs: topic names it consumes.
        outputs: topic names it writes.
        transform: ``df -> df`` (one output) or ``-> {topic: df}``; with several inputs
            or any lookup it receives ``{topic: df}`` (inputs and lookups). Input frames carry ``_id`` (kept, it becomes the
            output's parent id) and the other metadata columns. A transform that takes a
            second positional parameter gets the stage's ``StageContext`` there
            (``transform(df, ctx)``: run id, logical date, reads of any topic; context.py).
        row_fn: alternatively, a function on the input model returning an output model,
            a dict, a list of them, or None; run on the executors.
        strategy: "strict" (any failing row fails the stage) or "best_effort" (failing
            rows stay new with their error; after ``max_attempts`` they are quarantined).
        topic_partitions: consume only these partitions of the input topics, so runs
            (or hosts) given disjoint partitions split a topic without overlap.
        start: where the stage's consumer starts when it is new: "earliest" (every row of
            its inputs) or "latest" (only rows appended from then on).
        lookups: topics or keyed tables read whole beside the new rows, in the plan's
            snapshot, never acked (``lookup.py``): their frames hold the model fields only.
    """

    name: str
    inputs: list[str]
    outputs: list[str]
    transform: Callable[..., Any] | None = None
    row_fn: Callable[[Any], Any] | None = None
    consumer: str | None = None
    strategy: str = "strict"
    max_attempts: int = 3
    partitions: int | None = None
    suites: list[Any] = field(default_factory=list)
    topic_partitions: list[int] | None = None  # consume only these partitions of the inputs
    start: str = "earliest"
    lookups: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        validate_consumer_name(self.name)
        self.inputs = [validate_topic_name(t) for t in ([self.inputs] if isinstance(self.inputs, str) else self.inputs)]
        self.outputs = [validate_topic_name(t) for t in ([self.outputs] if isinstance(self.outputs, str) else self.outputs)]
        if not self.inputs or not self.outputs:
            raise PipelineError(f"stage {self.name!r} needs at least one input and one output topic")
        self.lookups = [validate_topic_name(t) for t in ([self.lookups] if isinstance(self.lookups, str)
                                                         else self.lookups or [])]
        for name in self.lookups:
            if name in self.inputs or name in self.outputs:
                role = "an input" if name in self.inputs else "an output"
                raise PipelineError(f"stage {self.name!r}: lookup {name!r} is also {role} of the stage; "
                                    "a topic is read as new rows (inputs) or whole (lookups), not both")
        if self.row_fn is not None and self.lookups:
            raise PipelineError(f"stage {self.name!r}: a row_fn stage cannot take lookups; use transform= "
                                "(it receives {topic: DataFrame} with the lookups)")
        if (self.transform is None) == (self.row_fn is None):
            raise PipelineError(f"stage {self.name!r} needs exactly one of transform= or row_fn=")
        if self.row_fn is not None and (len(self.inputs) != 1 or len(self.outputs) != 1):
            raise PipelineError(f"stage {self.name!r}: row_fn stages take one input and one output topic")
        if strategy_problem(self.strategy):
            raise PipelineError(f"stage {self.name!r}: {strategy_problem(self.strategy)}")
        if self.max_attempts < 1:
            raise PipelineError(f"stage {self.name!r}: max_attempts must be >= 1")
        validate_consumer_name(self.consumer_name)
        if self.start not in ("earliest", "latest"):
            raise PipelineError(f"stage {self.name!r}: start must be 'earliest' or 'latest', got {self.start!r}")
        for suite in self.suites:
            if suite.topic is None and len(self.outputs) == 1:
                suite.topic = self.outputs[0]
            if suite.topic not in self.outputs:
                raise PipelineError(f"stage {self.name!r}: suite {suite.name!r} checks topic {suite.topic!r}, "
                                    f"which is not one of its outputs {self.outputs!r}")

    @property
    def consumer_name(self) -> str:
        return self.consumer or self.name


def _layout(source: Source, name: str) -> TopicLayout:
    """The topic's layout: as the Source has it open, else read from the catalog."""
    topic = source.opened(name)
    return topic.layout if topic is not None else source.layout(name)


def _model(source: Source, name: str, stage: Stage, role: str, layout: TopicLayout):
    """The model of a row_fn stage's input (``role="input"``) or output topic.

    In order: the topic as opened on this Source; the row_fn's annotation (its first
    parameter for the input, its return for the output), checked against the stored
    layout; the model stored in the catalog, when it can be imported.
    """
    topic = source.opened(name)
    if topic is not None:
        return topic.model
    hinted = _annotated_model(stage.row_fn, role)
    if hinted is not None:  # checked as reopening the topic with it would check it
        return catalog.check_model(source.ledger.conn, layout, hinted).model
    try:
        return source.model_of(name)
    except SchemaMismatchError as exc:
        raise PipelineError(
            f"stage {stage.name!r}: row_fn needs the model of topic {name!r}; annotate the function "
            f"or open the topic with source.topic({name!r}, Model) ({exc})"
        ) from exc


def _annotated_model(fn, role: str):
    import inspect
    import typing

    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: fall back to the catalog
        return None
    if role == "output":
        hint = hints.get("return")
    else:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        hint = hints.get(params[0].name) if params else None
    return hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None


def register_consumers(source: Source, stages: list[Stage]) -> list:
    """Register every stage's consumer on its inputs, in one transaction, before any stage runs.

    A new consumer starts at its stage's ``start``; existing ones keep their positions.
    Returns the ``acks.Registration`` of each (stage, input).

    Raises:
        TopicNotFoundError: an input topic is not in the file.
    """
    from ...util.clock import utc_now

    now = utc_now()
    with source.ledger.atomic() as conn:
        for stage in stages:
            for name in stage.inputs:
                source.layout(name)
        return [acks.register_in_current_transaction(conn, name, stage.consumer_name, now, start=stage.start)
                for stage in stages for name in stage.inputs]


def run_stage(spark, source: Source, stage: Stage, *, commit_batch_rows: int = 50_000,
              staging: str | None = None, dry_run: bool = False, run_id: str | None = None,
              lock_wait: float = 0.0, upto: dict[str, int] | None = None,
              consumer_ids: dict[str, int] | None = None, pipeline: str | None = None,
              logical_date: date | str | None = None) -> RunResult:
    """Run one stage end to end and return its RunResult (also in the run log).

    ``upto`` caps the high-watermark of some inputs ({topic: id}): rows above it wait
    for a later run (chunked backlogs, fixed-time triggers).

    Args:
        staging: a staging URI every node sees (the driver exports the inputs there and
            the executors never open the ledger), ``"local"`` (JDBC reads and staging
            beside the ledger even on a non-local master), or None: JDBC on a local
            master, an error on any other.
        lock_wait: seconds to wait for another run of the same stage to finish.
        consumer_ids: {input: the consumer's id} when the caller registered the stage's
            consumer already (a pipeline registers every stage's before any runs): the plan
            then registers nothing again.
        pipeline: the pipeline's name, for the transform's context (``ctx.pipeline``).
        logical_date: the night the run stands for (a date or ``YYYY-MM-DD``; default: today
            in UTC): ``ctx.logical_date``, recorded in the run's ``details["logical_date"]``.

    Raises:
        TopicNotFoundError: an input or output topic is not in the ledger (nothing runs).
        StageRunningError: another run of this stage holds its lock (nothing was touched).
        StagingError: the staging location is missing or not writable (nothing runs).
        InvalidSettingError: ``logical_date`` is not a date (nothing runs).
        StageFailed: anything went wrong; nothing was committed and the inputs stay new.
    """
    from ...errors import StageRunningError
    from ...util.filelock import LockBusy, exclusive_lock

    layouts = {name: _layout(source, name) for name in (*stage.inputs, *stage.outputs)}  # each read once
    run = RunResult(run_id or new_run_id(stage.name), "stage", stage=stage.name, consumer=stage.consumer_name,
                    inputs=list(stage.inputs), outputs=list(stage.outputs),
                    details={"strategy": stage.strategy, "engine": "spark",
                             "session": "connect" if is_connect(spark) else "classic",
                             "logical_date": logical_date_of(logical_date).isoformat(),
                             **({"pipeline": pipeline} if pipeline else {})})
    # the lock comes first: nothing on disk (staging, leftovers) is touched without it
    try:
        lock = exclusive_lock(lock_path(source, stage.name), wait=lock_wait, note=f"run {run.run_id}")
        lock.__enter__()
    except LockBusy as exc:
        raise StageRunningError(f"stage {stage.name!r} is running ({exc.holder or 'another process'}); "
                                f"this run ({run.run_id}) did nothing") from None
    try:
        return _run_locked(spark, source, stage, run, staging, commit_batch_rows, dry_run, upto or {}, layouts,
                           consumer_ids)
    finally:
        lock.__exit__(None, None, None)


def _run_locked(spark, source: Source, stage: Stage, run: RunResult, staging: str | None, batch_rows: int,
                dry_run: bool, upto: dict[str, int], layouts: dict[str, TopicLayout],
                consumer_ids: dict[str, int] | None) -> RunResult:
    from .. import staging as stg

    area = None
    if spark is not None:
        area = stg.choose_staging(master_of(spark), staging, source.path)
        stg.check_area(area)
        run.details["staging"] = "exchange" if area.exchange else "jdbc"
    stg.sweep_stage(source.path, stage.name)  # dead runs' staging: nothing of it was committed, never trust it
    if not dry_run:  # the 'running' row: a run killed from here on shows as interrupted (runlog.py)
        try:
            with source.ledger.atomic() as conn:
                dead = start_run_in_current_transaction(conn, run, str(lock_path(source, stage.name)),
                                                        holding_lock=True)
        except LedgerError as exc:  # a ledger another process holds locked: nothing started, nothing written
            run.finish("failed", describe(exc))
            raise StageFailed(stage.name, run.run_id, describe(exc), result=run) from exc
        if dead:
            log.info("%s", resume_note(dead))  # the runner prints it (StageOutcome.resumed_note)
    checkpoint("stage:started")
    run_uri = area.run_uri(stage.name, run.run_id) if area else None
    mark = None
    if run_uri:
        mark = stg.mark_staged(source.path, stage.name, run.run_id, run_uri, engine=engine_of(spark),
                               session=spark.session_id if is_connect(spark) else None)
    target = stage.outputs[0] if len(stage.outputs) == 1 else None
    source.ledger.emit(Event("pipeline_start", stage.inputs[0], None, {
        "target": target, "stage": stage.name, "run_id": run.run_id, "dry_run": dry_run}))
    try:
        _run(spark, source, stage, run, area, run_uri, batch_rows, dry_run, upto, layouts, consumer_ids)
    except BaseException as exc:
        stopped = None if isinstance(exc, KeyboardInterrupt) else engine_stopped_error(spark, stage.name)
        if stopped is not None:  # whatever a call to a stopped engine raised, the cause is the engine's
            stopped.__cause__, exc = exc, stopped
        run.finish(failure_status(exc), interruption(exc) if isinstance(exc, KeyboardInterrupt) else describe(exc))
        if not dry_run:
            try:
                with source.ledger.atomic() as conn:
                    write_run_in_current_transaction(conn, run)
            except Exception:  # the original failure matters more than its log row
                pass
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise StageFailed(stage.name, run.run_id, describe(exc), result=run) from exc
    finally:
        if run_uri:
            try:
                stg.remove(run_uri)
                mark.unlink()
            except Exception:  # noqa: BLE001 - the next run removes it
                pass
        source.ledger.emit(Event("pipeline_end", stage.inputs[0], None, {
            "target": target, "count": run.rows_out, "dry_run": dry_run,
            "stage": stage.name, "run_id": run.run_id, "status": run.status, "rows_out": run.rows_out}))
    return run


def _read_inputs(spark, source: Source, stage: Stage, in_layouts: dict, bounds: dict, area, run_uri: str | None,
                 run: RunResult) -> dict:
    from .. import staging as stg
    from ..types import to_model_columns

    if not area.exchange:
        return {name: read_topic(spark, source, layout, bounds=bounds[name], partitions=stage.partitions)
                for name, layout in in_layouts.items()}
    t0 = time.perf_counter()
    frames = {}
    for name, layout in in_layouts.items():
        uri = stg.join(run_uri, "in", name)
        rows = stg.export_topic(source.ledger.conn, layout, bounds[name].where, uri)
        frame = to_model_columns(stg.read_exported(spark, layout, uri), layout)
        files = -(-rows // stg.EXPORT_ROWS_PER_FILE)
        if stage.partitions or files > 1:
            # partitions as id ranges in id order, as the JDBC read gives them: Spark packs files
            # by size, and the commit's "earliest row wins" on duplicates needs id order
            frame = frame.repartitionByRange(stage.partitions or files, "_id")
        frames[name] = frame
    run.details["export_seconds"] = round(time.perf_counter() - t0, 3)
    return frames


@dataclass
class _Work:
    """One run of a stage from its plan to its commit: what every write path reads and adds to."""

    spark: Any
    source: Source
    stage: Stage
    run: RunResult
    out_layouts: dict[str, TopicLayout]
    run_uri: str | None
    batch_rows: int
    dry_run: bool
    report_dir: Path
    outcomes: list = field(default_factory=list)  # the suites' results, every output's
    quarantined: list[tuple] = field(default_factory=list)  # (topic, parent id, payload, reason)
    staged: dict[str, tuple[str, int]] = field(default_factory=dict)  # topic -> (uri, rows Spark wrote)
    followed: tuple[str, FollowedWrite] | None = None  # (topic, its write, read while it runs)
    failures: dict[int, str] = field(default_factory=dict)  # a row_fn's failing input rows
    persisted: Persisted | None = None  # what the stage persists after its lookups, released once staged

    def uri(self, topic: str) -> str:
        from ..staging import join

        return join(self.run_uri, "out", topic)

    def checked(self, frame, topic: str, parent_column: str = "_id", before_checks=None):
        """``_apply_quality`` of ``frame`` for ``topic``: what may be committed."""
        return _apply_quality(self, frame, topic, parent_column, before_checks=before_checks)

    def follow(self, topic: str, frame) -> FollowedWrite:
        """Start the staged write of ``frame`` that the commit reads while Spark writes it."""
        conformed = conform(frame, self.out_layouts[topic], stage=self.stage.name)
        return FollowedWrite(self.spark, lambda u, df=conformed: _stage_write(df, u, options=V2_COMMITTER),
                             self.uri(topic), self.batch_rows, on_written=lambda: checkpoint("stage:staged"))


def _run(spark, source: Source, stage: Stage, run: RunResult, area, run_uri: str | None, batch_rows: int,
         dry_run: bool, upto: dict[str, int], layouts: dict[str, TopicLayout],
         consumer_ids: dict[str, int] | None) -> None:
    # one read of the ledger fixes the plan: layouts, the consumer's ids, the bounds (a dry
    # run of a stage whose consumer is not registered yet reads what it would start with)
    plan = plan_stage(source, stage, upto=upto, dry_run=dry_run, layouts=layouts, consumer_ids=consumer_ids)
    run.watermarks = plan.watermarks
    run.rows_in = plan.rows_in
    work = _Work(spark, source, stage, run, plan.outputs, run_uri, batch_rows, dry_run,
                 retention.report_dir(source.path))
    t0 = time.perf_counter()
    if run.rows_in:
        frames = _read_inputs(spark, source, stage, plan.inputs, plan.bounds, area, run_uri, run)
        frames.update(read_lookups(spark, source, plan, area, run_uri, run))  # kept in memory by lookup.py
        work.persisted = Persisted(spark)
        checkpoint("stage:read")  # the inputs are planned, Spark has run nothing yet
        if stage.row_fn is not None:
            _write_rows(work, frames, plan.inputs)
        else:
            result = _transformed(stage, frames, _context(work, plan, area, frames))
            for dst, frame in result.items():
                _write_output(work, dst, frame, only=len(result) == 1)
    _commit(work, plan, t0)


def _context(work: _Work, plan, area, frames: dict) -> StageContext | None:
    """The transform's context when its signature takes one (``transform(df, ctx)``), else None."""
    if not takes_context(work.stage.transform):
        return None
    run = work.run
    return StageContext(run_id=run.run_id, stage=work.stage.name, pipeline=run.details.get("pipeline"),
                        logical_date=date.fromisoformat(run.details["logical_date"]), spark=work.spark,
                        snapshot=plan.snapshot, source=work.source, area=area, run_uri=work.run_uri,
                        lookups={n: frames[n] for n in getattr(work.stage, "lookups", None) or () if n in frames})


def _transformed(stage: Stage, frames: dict, ctx: StageContext | None = None) -> dict:
    """The stage's transform on its inputs (and its context, when it takes one), as {output topic: DataFrame}."""
    given = frames[stage.inputs[0]] if len(stage.inputs) == 1 and not stage.lookups else frames
    result = stage.transform(given) if ctx is None else stage.transform(given, ctx)
    if not isinstance(result, dict):
        if len(stage.outputs) != 1:
            raise PipelineError(f"stage {stage.name!r} has outputs {stage.outputs!r}: its transform must return "
                                "a dict {topic: DataFrame}")
        result = {stage.outputs[0]: result}
    unknown = sorted(set(result) - set(stage.outputs))
    if unknown:
        raise PipelineError(f"stage {stage.name!r} returned frames for undeclared topic(s) {unknown!r}")
    return result


def _write_rows(work: _Work, frames: dict, in_layouts: dict[str, TopicLayout]) -> None:
    """A row_fn stage: the function on the executors, checked, staged; its failing rows kept."""
    from ..staging import open_staged

    stage, source = work.stage, work.source
    (src,), (dst,) = stage.inputs, stage.outputs
    out = apply_row_function(frames[src], stage.row_fn, _model(source, src, stage, "input", in_layouts[src]),
                             _model(source, dst, stage, "output", work.out_layouts[dst]), work.out_layouts[dst])
    work.staged[dst] = _checked_write(work, out, dst)
    work.failures = _split_failures(open_staged(*work.staged[dst]), stage)


def _write_output(work: _Work, dst: str, frame, *, only: bool) -> None:
    """One output of a transform, by one of three write paths: the commit follows Spark's write
    while the checks run, or after them, or reads a finished staged write (several outputs, a
    dry run, or rows the checks may set aside)."""
    following = FOLLOW_WRITE and not work.dry_run and only  # the commit reads the output as Spark writes it
    if following and _checks_keep_every_row(work.stage, dst):
        work.followed = (dst, _write_while_checking(work, dst, frame))
    elif following:
        work.followed = (dst, work.follow(dst, work.checked(frame, dst)))
    else:
        _write_staged(work, dst, work.checked(frame, dst))


def _write_staged(work: _Work, dst: str, frame) -> None:
    """Conform and stage ``frame``; the values the ledger would refuse go to the quarantine."""
    from ..staging import open_staged

    uri = work.uri(dst)
    work.staged[dst] = (uri, _stage_write(conform(frame, work.out_layouts[dst], stage=work.stage.name), uri))
    work.quarantined += refused_rows(open_staged(*work.staged[dst]), dst)


def _commit(work: _Work, plan, t0: float) -> None:
    """Commit what was staged (or followed) with the inputs' acks; a dry run rehearses it."""
    from .. import staging as stg

    stage, run = work.stage, work.run
    t1 = time.perf_counter()
    inputs = [InputState(name, b.upto, b.rows, work.failures if name == stage.inputs[0] else {},
                         partitions=b.partitions, consumer_id=plan.consumer_ids[name])
              for name, b in plan.bounds.items()]
    outputs: list[StagedOutput] = []
    if work.followed is None:
        run.details["spark_seconds"] = round(time.perf_counter() - t0, 3)
        _unpersist_all(work)
        datasets = {dst: stg.open_staged(uri, rows) for dst, (uri, rows) in work.staged.items()}
        if not work.dry_run:
            checkpoint("stage:staged")
        t1 = time.perf_counter()
        outputs = [StagedOutput(work.out_layouts[dst], _batches(datasets[dst], work.batch_rows, *work.staged[dst]))
                   for dst in work.staged]

    finishers = () if work.dry_run else lake_finishers(work.source.ledger.conn, stage.outputs)  # ledger/lake

    def commit(outputs: list[StagedOutput], quarantine: list[tuple] | Callable[[], list[tuple]]) -> None:
        commit_stage(work.source.ledger, run, consumer=stage.consumer_name, inputs=inputs, outputs=outputs,
                     max_attempts=stage.max_attempts if stage.strategy == "best_effort" else None,
                     default_parent_topic=stage.inputs[0] if len(stage.inputs) == 1 else None,
                     quarantine=quarantine, finishers=finishers)

    if work.followed is not None:
        dst, write = work.followed
        _commit_following(work, commit, write, dst, t0)
    elif work.dry_run:  # the very commit, rolled back: the counts (duplicates included) are what a run would do
        def rehearsed() -> None:
            register_consumers(work.source, [stage])  # as the real run does first (its start rule), rolled back too
            commit(outputs, work.quarantined)

        _rehearse(work.source, rehearsed)
        run.details["dry_run"] = True
    else:
        commit(outputs, work.quarantined)
    run.details["commit_seconds"] = round(time.perf_counter() - t1, 3)


def _commit_following(work: _Work, commit, write: FollowedWrite, dst: str, t0: float) -> None:
    """Commit while Spark writes (``follow.py``); if the write outlasts what the commit may
    wait for holding the lock, roll back and commit after the write instead."""
    from ..staging import open_staged

    run, layout, quarantined, batch_rows = work.run, work.out_layouts[dst], work.quarantined, work.batch_rows

    try:
        write.wait_first()  # no lock is held until the first task's output is there
        try:
            commit([StagedOutput(layout, write)],
                   lambda: quarantined + refused_rows(open_staged(write.uri, write.result()), dst))
            run.details["commit_overlaps_spark"] = True
        except FollowedWrite.Abandoned:  # rolled back (commit_stage put the run's counts back)
            written = write.result()
            checkpoint("stage:staged")
            dataset = open_staged(write.uri, written)
            commit([StagedOutput(layout, _batches(dataset, batch_rows, write.uri, written))],
                   quarantined + refused_rows(dataset, dst))
            run.details["commit_overlaps_spark"] = False
    finally:
        try:
            write.close()
            _unpersist_all(work)
        except Exception:  # noqa: BLE001 - clean-up only: the commit's own outcome stands
            pass
        run.details["spark_seconds"] = round(write.spark_seconds + write.started - t0, 3)


class _Rehearsal(Exception):
    """Rolls back a dry run's commit once it has counted what it would write."""


def _rehearse(source: Source, commit: Callable[[], None]) -> None:
    """Run ``commit`` inside a transaction that is then rolled back: nothing stays written,
    no event fires, and the run's counts are exactly those of the real commit."""
    try:
        with source.ledger.atomic():
            commit()
            raise _Rehearsal
    except _Rehearsal:
        pass


STAGING_ROW_GROUP_BYTES = 8 * 1024 * 1024
FOLLOW_WRITE = True  # False: the commit starts once the write job has ended (tests compare the two)


def _stage_write(df, uri: str, options: dict[str, str] | None = None) -> int:
    """Write the staged Parquet; return the rows the write job counted.

    Small row groups keep the commit's read of the staged files bounded on the driver.
    """
    from ..staging import write_counted

    return write_counted(df, uri, row_group_bytes=STAGING_ROW_GROUP_BYTES, options=options)


def _checks_keep_every_row(stage: Stage, topic: str) -> bool:
    """The topic has suites and none sets rows aside (policy fail or warn): what the checks let
    through is the whole frame or nothing."""
    suites = [s for s in stage.suites if s.topic == topic]
    return bool(suites) and all(s.policy != "quarantine" for s in suites)


def _write_while_checking(work: _Work, topic: str, frame) -> FollowedWrite:
    """The checks of ``topic`` with the followed write started as soon as the checked frame is
    persisted, so Spark writes while the checks run; cancelled if they fail."""
    write, problem = None, None

    def start(out) -> None:
        nonlocal write, problem
        try:
            write = work.follow(topic, out)
        except Exception as exc:  # noqa: BLE001 - an output that does not fit its topic: after the checks, as before
            problem = exc

    try:
        work.checked(frame, topic, before_checks=start)
    except BaseException:
        if write is not None:
            write.close()
        raise
    if problem is not None:
        raise problem
    return write


def _checked_write(work: _Work, out, topic: str) -> tuple[str, int]:
    """A row_fn's output checked, then the staged write of what the checks let through: (uri, rows written).

    With suites, Spark starts writing the whole frame as soon as it is persisted, while the
    checks run: that is what is written when no row is set aside, the common case. If the
    checks set rows aside (policy quarantine), that write is cancelled and what they let
    through is written beside it instead; if they fail, it is cancelled."""
    uri = work.uri(topic)
    if not any(s.topic == topic for s in work.stage.suites):
        return uri, _stage_write(out, uri)
    started: list = []  # (frame, its write)

    def start(whole) -> None:
        started.append((whole, FollowedWrite(work.spark, lambda u, df=whole: _stage_write(df, u), uri,
                                             work.batch_rows)))

    try:
        kept = work.checked(out, topic, "_parent_id", before_checks=start)
    except BaseException:
        for _frame, write in started:
            write.close()
        raise
    (whole, write), = started
    if kept is whole:
        return uri, write.result()
    write.close()
    uri = uri.rstrip("/") + "-kept"  # beside the cancelled write, whatever it left
    return uri, _stage_write(kept, uri)


def _apply_quality(work: _Work, frame, topic: str, parent_column: str, before_checks=None):
    """Run the topic's suites on ``frame``; apply each suite's policy; return what may be committed.

    ``before_checks(out)``: called with what is committed when no row is set aside, before the
    suites run (``_write_while_checking``, ``_checked_write``); when none is, that same frame
    is returned."""
    stage, layout, run, outcomes, quarantined = work.stage, work.out_layouts[topic], work.run, work.outcomes, \
        work.quarantined
    suites = [s for s in stage.suites if s.topic == topic]
    if not suites:
        return frame
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from ...errors import QualityFailed
    from ...quality.validate import ROW_KEY, run_suite, write_report

    t0 = time.perf_counter()
    keyed = frame.withColumn(ROW_KEY, F.monotonically_increasing_id()).persist(StorageLevel.MEMORY_AND_DISK)
    checked = keyed.where(F.col(ERROR).isNull()) if ERROR in keyed.columns else keyed
    # the suites see the model's fields in order, nothing internal (a missing optional field as null)
    view = [F.col(quote_back(c.name)) if c.name in keyed.columns
            else F.lit(None).cast(storage_sql_type(c)).alias(c.name) for c in layout.columns]
    whole = keyed.drop(ROW_KEY)  # what is committed when no row is set aside (this very frame)
    if before_checks is not None:
        before_checks(whole)
    checkpoint("stage:checks")  # the suites are about to run on Spark
    results = [run_suite(checked.select(*view), suite, rows_in=run.rows_in, stage=stage.name,
                         keyed=checked.select(*view, ROW_KEY)) for suite in suites]
    outcomes.extend(results)
    report = write_report(work.report_dir / f"{run.run_id}.html", run.run_id, stage.name, outcomes)
    run.quality = {"suites": [o.as_dict() for o in outcomes], "report": str(report.resolve()),
                   "seconds": round((run.quality or {}).get("seconds", 0) + time.perf_counter() - t0, 3)}
    failing = [o for o in results if (o.policy == "fail" and not o.success) or (o.policy == "quarantine" and o.table_failures)]
    if failing:
        from ...quality.report import describe as described

        raise QualityFailed(failing, [f"{o.suite}: {r['expectation']}" + (f"({r['column']})" if r["column"] else "")
                                      + f" {described(r)}" for o in failing for r in o.results if not r["success"]])
    bad: dict[int, list[str]] = {}
    for o in results:
        for key, labels in o.bad_rows.items():
            bad.setdefault(key, []).extend(labels)
    if not bad:
        return whole
    spark = frame.sparkSession
    ids = spark.createDataFrame([(k, "; ".join(v)) for k, v in bad.items()], f"{ROW_KEY} long, _mk_reason string")
    fields = [c for c in layout.field_names if c in keyed.columns]
    parent = F.col(parent_column) if parent_column in keyed.columns else F.lit(None).cast("long")
    for row in keyed.join(F.broadcast(ids), ROW_KEY).select(
            parent.alias("p"), F.to_json(F.struct(*fields)).alias("payload"), "_mk_reason").toLocalIterator():
        quarantined.append((topic, row["p"], row["payload"], "failed expectation: " + row["_mk_reason"]))
    return keyed.join(F.broadcast(ids.select(ROW_KEY)), ROW_KEY, "left_anti").drop(ROW_KEY)


def _unpersist_all(work: _Work) -> None:
    """Drop what the stage persisted (``persisted.py``): on an engine, not the lookups it keeps."""
    if work.persisted is not None:
        work.persisted.release()


def _batches(dataset, batch_rows: int, uri: str, expected: int):
    """Stream staged rows in bounded Arrow batches (error rows left out).

    After the last batch the rows read are checked against what Spark reported writing:
    a difference raises inside the commit's transaction, so nothing is committed.
    """
    import pyarrow.compute as pc

    from ..staging import check_count

    has_error = ERROR in dataset.schema.names
    read = 0
    # no read-ahead: the driver holds one batch (and one row group) at a time
    for batch in dataset.to_batches(batch_size=batch_rows, batch_readahead=0, fragment_readahead=0,
                                    use_threads=False):
        read += batch.num_rows
        if has_error:
            batch = batch.filter(pc.is_null(batch.column(ERROR)))
        yield batch
    check_count(uri, expected, read)


def _split_failures(dataset, stage: Stage) -> dict[int, str]:
    """Row errors of a row_fn stage: strict raises on the first, best_effort returns them."""
    import pyarrow.compute as pc

    errors = dataset.to_table(columns=["_parent_id", ERROR], filter=pc.field(ERROR).is_valid())
    failures = dict(zip(errors.column("_parent_id").to_pylist(), errors.column(ERROR).to_pylist()))
    if failures and stage.strategy == "strict":
        row_id = min(failures)
        raise PipelineError(
            f"stage {stage.name!r}: row {row_id} of topic {stage.inputs[0]!r} failed: {failures[row_id]} "
            f"({len(failures)} failing row(s); strategy 'strict' commits nothing)"
        )
    return failures

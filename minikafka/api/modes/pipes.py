"""Row-level pipelines: ``topic.pipe(fn).to(target).run()`` and ``Source.full_pipeline``.

Each consumed row's outputs and its ack are atomic (a savepoint per row), and rows
are grouped into larger transactions (by count and by time) so a run does not pay
one fsync per row. ``fn`` runs outside any transaction: a slow call (an LLM, an HTTP
request) never holds the write lock.
"""

from __future__ import annotations

import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from ...errors import (
    DuplicateMessageError,
    FanOutError,
    FanOutFailure,
    InvalidRecordError,
    InvalidSettingError,
    PipelineError,
    TopicNotFoundError,
)
from ...ledger.consuming import RunResult, new_run_id, write_run_in_current_transaction
from ...ledger.topics import TopicTable, acks
from ...ledger.transactions import Event
from ...util.clock import utc_now
from ...util.dag import topological_order
from ...util.gcpause import gc_paused
from ...util.mermaid import render
from ...util.strategy import Strategy, strategy_problem
from ..core import engines
from ..core.keyed import KeyedRows

if TYPE_CHECKING:
    from ..core.handles import SourceHandle, TopicHandle
    from ..core.record import Record

ModelT = TypeVar("ModelT", bound=BaseModel)
OutT = TypeVar("OutT")


class Pipeline(Generic[ModelT, OutT]):
    """One arm: ``fn`` applied to each new row of ``source_topic``, written to ``target``."""

    def __init__(self, source_topic: TopicHandle, fn: Callable[[ModelT], OutT], *, consumer: str | None = None,
                 start: str = "earliest"):
        if not callable(fn):
            raise PipelineError(f"pipe() needs a callable, got {fn!r}")
        self.source_topic = source_topic
        self.fn = fn
        self.consumer = consumer
        self.start = acks.check_start(start)  # where a new ``consumer`` starts
        self.target_topic: TopicHandle | None = None
        self.last_result: RunResult | None = None

    def to(self, target: TopicHandle | str) -> Pipeline[ModelT, OutT]:
        """Set the target topic (a Topic, or the name of one opened on the same Source).

        Raises:
            TopicNotFoundError: (a KeyError) no topic of that name was opened on the Source.
        """
        if isinstance(target, str):
            name, target = target, self.source_topic.source.opened(target)
            if target is None:
                raise TopicNotFoundError(
                    f"topic {name!r} is not open on this Source; call source.topic({name!r}, Model) first")
        self.target_topic = target
        return self

    @property
    def source_name(self) -> str:
        return self.source_topic.name

    @property
    def target_name(self) -> str | None:
        return self.target_topic.name if self.target_topic is not None else None

    def _apply(self, data: ModelT) -> Any:
        result = self.fn(data)
        if self.target_topic is None or result is None:
            return result
        return self.target_topic.rows.validate(result)

    def run(self, *, dry_run: bool = False, batch_size: int = 1000) -> list[Any]:
        """Run over every new row of the source topic.

        Returns:
            The outputs in source-row order (validated target models, or ``fn``'s raw
            return values without a target). ``self.last_result`` holds the RunResult.

        Raises:
            Whatever ``fn`` raises (rows before it are committed, its row stays new).
            pydantic.ValidationError: an output does not fit the target model.
            DuplicateMessageError: an output's dedup key exists; its row stays new.

        Emits:
            pipeline_start, message_appended, message_handled, pipeline_end.
        """
        full = FullPipeline(self.source_topic.source, [self], batch_size=batch_size)
        try:
            return full.run(dry_run=dry_run)[0]
        finally:
            self.last_result = full.last_result

    def plot(self, *, counts: bool = False) -> str:
        """The Mermaid ``graph TD`` of this arm."""
        return FullPipeline(self.source_topic.source, [self]).plot(counts=counts)


class FullPipeline:
    """Several arms run as one DAG, source topics in topological order."""

    def __init__(self, source: SourceHandle, pipelines: list[Pipeline], *, batch_size: int = 1000,
                 max_batch_seconds: float = 1.0):
        for p in pipelines:
            if not isinstance(p, Pipeline):
                raise PipelineError(f"full_pipeline() takes topic.pipe(fn).to(target) arms, got {p!r}")
            if p.source_topic.source is not source or (p.target_topic and p.target_topic.source is not source):
                raise PipelineError("every arm of a full_pipeline must use topics of the same Source")
        if batch_size < 1:
            raise InvalidSettingError("batch_size must be >= 1")
        self.source = source
        self.pipelines = list(pipelines)
        self.batch_size = batch_size
        self.max_batch_seconds = max_batch_seconds
        self.last_result: RunResult | None = None

    # -- shape --------------------------------------------------------------------
    def _groups(self) -> list[tuple[TopicHandle, str | None, list[Pipeline]]]:
        """(source topic, consumer, sibling arms) in topological order of the topics."""
        nodes = []
        for p in self.pipelines:
            for n in (p.source_name, p.target_name):
                if n is not None and n not in nodes:
                    nodes.append(n)
        edges = [(p.source_name, p.target_name) for p in self.pipelines if p.target_name is not None]
        order = topological_order(nodes, edges)
        by_key: dict[tuple[str, str | None], list[Pipeline]] = defaultdict(list)
        for p in self.pipelines:
            by_key[(p.source_name, p.consumer)].append(p)
        groups = []
        for name in order:
            for (src, consumer), arms in by_key.items():
                if src == name:
                    groups.append((arms[0].source_topic, consumer, arms))
        return groups

    def plot(self, *, counts: bool = False) -> str:
        """Mermaid ``graph TD``; with ``counts=True`` each topic shows its new/handled counts."""
        edges = [(p.source_name, p.target_name) for p in self.pipelines]
        numbers = None
        if counts:
            topics = {}
            for p in self.pipelines:
                for t in (p.source_topic, p.target_topic):
                    if t is not None:
                        topics[t.name] = t
            numbers = {n: (t.count("new"), t.count("handled")) for n, t in topics.items()}
        return render(edges, numbers)

    # -- running ------------------------------------------------------------------
    def run(self, *, dry_run: bool = False, strategy: Strategy = "strict", engine: Any = None) -> list[list[Any]]:
        """Run every arm; see the module docstring for the transaction shape.

        Args:
            dry_run: call the functions and validate outputs; write nothing.
            strategy: "strict" stops at the first failure (rows before it are kept);
                "best_effort" keeps going, acks a row only if all its siblings
                succeeded, and raises FanOutError at the end.
            engine: a SparkSession to run each arm as a Spark stage (its function runs
                per row on the executors; each arm is a consumer named
                ``source:target``). Needs a file Source.

        Returns:
            One list of outputs per arm, in the order the arms were given (with
            ``engine``: one list holding the arm's RunResult).

        Raises:
            PipelineCycleError: the arms form a cycle (nothing runs).
            FanOutError: best_effort run with failures (``.failures``).
        """
        if strategy_problem(strategy):
            raise InvalidSettingError(strategy_problem(strategy))
        groups = self._groups()
        if engine is not None:
            return engines.engine("spark").run_arms(self, engine, groups, strategy, dry_run)
        ledger = self.source.ledger
        result = RunResult(
            new_run_id("pipeline"), "pipeline",
            stage=", ".join(f"{p.source_name}->{p.target_name}" for p in self.pipelines)[:500],
            inputs=sorted({p.source_name for p in self.pipelines}),
            outputs=sorted({p.target_name for p in self.pipelines if p.target_name}),
            details={"strategy": strategy, "dry_run": dry_run},
        )
        self.last_result = result
        results: dict[int, list[Any]] = {id(p): [] for p in self.pipelines}
        failures: list[FanOutFailure] = []
        try:
            for topic, consumer, arms in groups:
                result.watermarks[topic.name] = topic.high_watermark()
                targets = [a.target_name for a in arms]
                for arm in arms:  # minikafka's shape: one start/end pair per arm
                    ledger.emit(Event("pipeline_start", topic.name, None, {
                        "target": arm.target_name, "targets": targets, "consumer": consumer,
                        "run_id": result.run_id, "dry_run": dry_run,
                    }))
                before = (result.rows_in, result.rows_out, result.rows_failed)
                counts = {id(a): len(results[id(a)]) for a in arms}
                try:
                    # outputs accumulate in ``results``: without the pause, collector passes
                    # over them grow with the run and dominate its time
                    with gc_paused():
                        _GroupRun(self, topic, consumer, arms, strategy, dry_run, result, results, failures).run()
                finally:
                    for arm in arms:
                        ledger.emit(Event("pipeline_end", topic.name, None, {
                            "target": arm.target_name, "count": len(results[id(arm)]) - counts[id(arm)],
                            "dry_run": dry_run, "targets": targets, "consumer": consumer, "run_id": result.run_id,
                            "rows_in": result.rows_in - before[0], "rows_out": result.rows_out - before[1],
                            "rows_failed": result.rows_failed - before[2],
                        }))
        except BaseException as exc:
            self._log(result.finish("failed", f"{type(exc).__name__}: {exc}"), dry_run)
            raise
        if failures:
            error = FanOutError(failures)
            self._log(result.finish("partial", str(error)), dry_run)
            raise error
        self._log(result.finish("succeeded"), dry_run)
        return [results[id(p)] for p in self.pipelines]

    def _log(self, result: RunResult, dry_run: bool) -> None:
        if dry_run:
            return
        try:
            with self.source.ledger.atomic() as conn:
                write_run_in_current_transaction(conn, result)
        except Exception:  # the run's own outcome matters more than its log row
            pass


class _GroupRun:
    """One source topic (and consumer) with its sibling arms, batch by batch."""

    def __init__(self, full: FullPipeline, topic: TopicHandle, consumer: str | None, arms: list[Pipeline],
                 strategy: str, dry_run: bool, result: RunResult, results: dict, failures: list):
        self.full, self.topic, self.consumer, self.arms = full, topic, consumer, arms
        self.strategy, self.dry_run, self.result = strategy, dry_run, result
        self.results, self.failures = results, failures
        self.writes = any(a.target_topic is not None for a in arms) and not dry_run

    def run(self) -> None:
        reader = self.consumer
        if reader is not None:
            if not self.dry_run:
                self.topic.consumer(reader, start=self.arms[0].start)
            elif reader not in self.topic.consumers():
                reader = None  # not registered: read the topic-wide new rows (nothing is acked)
        batch: list[tuple[Record, list, list]] = []
        deadline = time.monotonic() + self.full.max_batch_seconds
        upto = self.result.watermarks[self.topic.name]
        for row in self.topic.rows.scan("new", reader, upto=upto):
            record = self.topic.rows.record(row, self.consumer, "new")
            self.result.rows_in += 1
            outs, errs = [], []
            for arm in self.arms:
                try:
                    outs.append((arm, arm._apply(record.data)))
                except Exception as exc:
                    if self.strategy == "strict":
                        self.result.rows_failed += 1
                        self._flush(batch)
                        raise
                    errs.append(FanOutFailure(record.id, self.topic.name, arm.target_name, exc))
            batch.append((record, outs, errs))
            if len(batch) >= self.full.batch_size or time.monotonic() >= deadline:
                self._flush(batch)
                batch = []
                deadline = time.monotonic() + self.full.max_batch_seconds
        self._flush(batch)

    def _collect(self, outs: list) -> None:
        for arm, value in outs:
            self.results[id(arm)].append(value)

    def _flush(self, batch: list) -> None:
        if not batch:
            return
        if not self.writes:
            for _record, outs, errs in batch:
                self._collect(outs)
                self.failures.extend(errs)
                self.result.rows_failed += bool(errs)
            return
        ledger = self.full.source.ledger
        now = utc_now()
        error: BaseException | None = None
        with ledger.atomic() as conn:
            consumers = acks.consumer_ids(conn, self.topic.name)
            consumer_id = None
            if self.consumer is not None:
                consumer_id = acks.register_consumer_in_current_transaction(conn, self.topic.name, self.consumer, now)
            if self.strategy == "strict" and ledger.on_event is None and self._write_batch(batch, now, consumer_id, consumers):
                return
            for record, outs, errs in batch:
                if self.strategy == "strict":
                    try:
                        with ledger.atomic():
                            written = self._write_outputs(record, outs, now, swallow_duplicates=False)
                            self.topic.rows.ack_in_current_transaction(record.id, self.consumer, now, consumers)
                    except Exception as exc:
                        self.result.rows_failed += 1
                        error = exc
                        break
                    self.result.rows_out += written
                    self._collect(outs)
                else:
                    ok = not errs
                    with ledger.atomic():
                        for arm, value in outs:
                            try:
                                with ledger.atomic():
                                    self.result.rows_out += self._write_outputs(record, [(arm, value)], now, swallow_duplicates=True)
                            except Exception as exc:
                                ok = False
                                self.failures.append(FanOutFailure(record.id, self.topic.name, arm.target_name, exc))
                        if ok:
                            self.topic.rows.ack_in_current_transaction(record.id, self.consumer, now, consumers)
                    self.failures.extend(errs)
                    self.result.rows_failed += not ok
                    self._collect(outs)
        if error is not None:
            raise error

    def _write_batch(self, batch: list, now: str, consumer_id: int | None, consumers: list[int]) -> bool:
        """Fast path of a strict batch: one executemany per target, then the acks.

        Same outcome as the row-by-row path when nothing fails; on any write error the
        batch savepoint is rolled back and False tells the caller to redo it row by row,
        which stops exactly at the failing row. Used when no observer needs per-row events.
        """
        ledger = self.full.source.ledger
        per_target: dict[int, tuple[TopicHandle, list]] = {}
        source_name, run_id = self.topic.name, self.result.run_id
        try:
            for record, outs, _errs in batch:
                for arm, value in outs:
                    target = arm.target_topic
                    if target is None or value is None:
                        continue
                    rows = per_target.setdefault(id(target), (target, []))[1]
                    rows.append((target.rows.encode(value), (record.id, source_name, run_id)))
        except InvalidRecordError:  # a value the ledger refuses: the row-by-row path names the row
            return False
        try:
            with ledger.atomic() as conn:
                for target, rows in per_target.values():
                    if isinstance(target.rows, KeyedRows):  # a keyed table merges its rows by key
                        target.rows.merge_encoded_in_current_transaction(
                            [values for values, _lineage in rows], lineage=[line[:2] for _values, line in rows],
                            run_id=run_id, now=now)
                        continue
                    TopicTable(conn, target.layout).insert_rows_in_current_transaction(
                        [values for values, _lineage in rows], now, lineage=[line for _values, line in rows])
                acks.ack_many_in_current_transaction(
                    conn, self.topic.name, [record.id for record, _o, _e in batch], consumer_id, now, consumers
                )
        except (sqlite3.IntegrityError, OverflowError, InvalidRecordError, DuplicateMessageError):
            return False
        self.result.rows_out += sum(len(rows) for _t, rows in per_target.values())
        for _record, outs, _errs in batch:
            self._collect(outs)
        return True

    def _write_outputs(self, record: Record, outs: list, now: str, *, swallow_duplicates: bool) -> int:
        written = 0
        for arm, value in outs:
            if arm.target_topic is None or value is None:
                continue
            try:
                row_id = arm.target_topic.rows.insert_one_in_current_transaction(
                    value, parent_id=record.id, parent_topic=self.topic.name, run_id=self.result.run_id, now=now,
                )
            except DuplicateMessageError:
                if not swallow_duplicates:
                    raise
                self.result.rows_duplicate += 1
                continue
            written += row_id is not None
        return written

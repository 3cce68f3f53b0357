"""Row-level arms (``topic.pipe(fn).to(target)``) run as per-row Spark stages.

``FullPipeline.run(engine=spark)`` reaches this module through the engine registry
(``minikafka.api.core.engines``), so the Python API never imports Spark.
"""

from __future__ import annotations

from typing import Any

from ...errors import FanOutError, FanOutFailure, PipelineError
from ...ledger.consuming import RunResult
from ...ledger.transactions import failed_rows_since
from .read import read_topic  # noqa: F401  (the registry hands this module out as the engine)
from .stage import Stage, StageFailed, register_consumers, run_stage


def run_arms(full: Any, spark: Any, groups: list, strategy: str, dry_run: bool) -> list[list[Any]]:
    """Each arm of ``full`` as a per-row Spark stage, in topological order of the topics.

    Returns:
        One list per arm holding its RunResult, in the order the arms were given.

    Raises:
        PipelineError: an arm has no target.
        StageFailed: strict strategy and a stage failed.
        FanOutError: best_effort strategy and some rows or stages failed.
    """
    source = full.source
    stages: dict[int, Stage] = {}
    for _topic, _consumer, arms in groups:
        for arm in arms:
            if arm.target_topic is None:
                raise PipelineError("every arm needs .to(target) to run on Spark")
            name = arm.consumer or f"{arm.source_name}:{arm.target_name}"
            stages[id(arm)] = Stage(name, [arm.source_name], [arm.target_name], row_fn=arm.fn,
                                    strategy=strategy, max_attempts=2**31)
    if not dry_run:
        register_consumers(source, list(stages.values()))
    results: dict[int, list[Any]] = {}
    failures: list[FanOutFailure] = []
    for _topic, _consumer, arms in groups:
        for arm in arms:
            stage = stages[id(arm)]
            try:
                result = run_stage(spark, source, stage, dry_run=dry_run)
            except StageFailed as exc:
                if strategy == "strict":
                    raise
                failures.append(FanOutFailure(-1, arm.source_name, arm.target_name, exc))
                continue
            results[id(arm)] = [result]
            if result.rows_failed:
                failures.extend(_row_failures(source, stage, result, arm))
    if failures:
        raise FanOutError(failures)
    return [results.get(id(p), []) for p in full.pipelines]


def _row_failures(source: Any, stage: Stage, result: RunResult, arm: Any) -> list[FanOutFailure]:
    rows = failed_rows_since(source.ledger.conn, arm.source_name, stage.consumer_name, result.started_at)
    return [FanOutFailure(row_id, arm.source_name, arm.target_name, RuntimeError(error)) for row_id, error in rows]

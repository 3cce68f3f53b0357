"""A stage over a large backlog in chunks of N input rows (``window = { rows = N }``).

Each chunk is a normal stage run whose high-watermark is capped at the N-th pending row
of each input, so it reads, stages and commits at most N rows per input: driver and
executor memory stay bounded by the chunk, and a failure loses at most one chunk's work
(like Spark's ``maxOffsetsPerTrigger``). The caps never pass the high-watermark taken
when the first chunk starts: rows appended meanwhile wait for the next run.
"""

from __future__ import annotations

from ...api.source import Source
from ...ledger.consuming import RunResult, new_run_id
from ...ledger.topics import TopicTable, acks
from .stage import Stage, register_consumers, run_stage


def nth_pending(source: Source, topic: str, consumer: str, n: int, upto: int) -> tuple[int, int]:
    """(id of the n-th row pending for ``consumer`` at or below ``upto`` (or ``upto``), rows pending there)."""
    table = TopicTable(source.ledger.conn, source.layout(topic))
    return table.nth_pending(acks.require_consumer(table.conn, topic, consumer), n, upto)


def run_stage_in_chunks(spark, source: Source, stage: Stage, rows: int, *, run_id: str | None = None,
                        dry_run: bool = False, upto: dict[str, int] | None = None, **kwargs) -> list[RunResult]:
    """Run ``stage`` chunk by chunk until its inputs have nothing pending up to the start's watermark.

    Chunk runs are ``run_id``, ``run_id.2``, ``run_id.3``, ... in the run log.

    Raises:
        StageFailed: a chunk failed (the chunks before it stay committed).
    """
    if rows < 1:
        raise ValueError(f"window rows must be >= 1, got {rows!r}")
    run_id = run_id or new_run_id(stage.name)
    if not dry_run:
        register_consumers(source, [stage])
    consumer = stage.consumer_name
    caps = {name: (upto or {}).get(name, TopicTable(source.ledger.conn, source.layout(name)).high_watermark())
            for name in stage.inputs}
    runs: list[RunResult] = []
    while True:
        chunk, pending = {}, 0
        for name in stage.inputs:
            if dry_run and consumer not in acks.consumer_names(source.ledger.conn, name):
                chunk[name], count = caps[name], 0
            else:
                chunk[name], count = nth_pending(source, name, consumer, rows, caps[name])
            pending += count
        if not pending and runs:
            return runs
        k = len(runs) + 1
        runs.append(run_stage(spark, source, stage, run_id=run_id if k == 1 else f"{run_id}.{k}", dry_run=dry_run,
                              upto=chunk, **kwargs))
        if dry_run or not pending:
            return runs


def combine(runs: list[RunResult]) -> dict:
    """One run-log-like row summing the chunks (run id of the first, ``details.chunks``)."""
    first = runs[0].as_row()
    for key in ("rows_in", "rows_out", "rows_duplicate", "rows_failed", "rows_quarantined"):
        first[key] = sum(getattr(r, key) for r in runs)
    first["duration_s"] = round(sum(r.duration_s or 0 for r in runs), 6)
    first["status"] = "partial" if any(r.status == "partial" for r in runs) else runs[-1].status
    first["finished_at"] = runs[-1].finished_at
    first["details"] = {**(runs[0].details or {}), "chunks": len(runs),
                        "chunk_run_ids": [r.run_id for r in runs]}
    by_topic = _summed_by_topic(runs)
    if by_topic is not None:
        first["details"]["rows_by_topic"] = by_topic
    return first


def _summed_by_topic(runs: list[RunResult]) -> dict | None:
    """The chunks' counts per topic (``details.rows_by_topic``) added up; None when none has them."""
    found = [r.details["rows_by_topic"] for r in runs if r.details and r.details.get("rows_by_topic")]
    if not found:
        return None
    total: dict = {"inputs": {}, "outputs": {}}
    for counts in found:
        for side in ("inputs", "outputs"):
            for topic, numbers in (counts.get(side) or {}).items():
                into = total[side].setdefault(topic, {})
                for key, n in numbers.items():
                    into[key] = into.get(key, 0) + n
    return total

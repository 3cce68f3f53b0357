"""The Prometheus text exposition (format 0.0.4) of a ledger's figures.

Names follow Prometheus' conventions: a ``minikafka_`` prefix, base units in the name
(``_seconds``, ``_bytes``; ``_rows`` and ``_jobs`` for counts of things), times as
``_timestamp_seconds`` since the epoch (0: never). Most figures are gauges: a state read
from the ledger that retention, purges or the next run can lower. The few the ledger keeps
as counts that only grow are counters named ``_total``: runs by final status (the run log;
pruning it lowers them, which Prometheus' ``rate``/``increase`` take as a counter reset),
rows ever appended to a topic (its highest id), rows ever quarantined (the quarantine's
sequence).
Labels are ``pipeline``, ``stage``, ``topic``, ``consumer``, ``queue``, ``state`` and
``status``: names the pipeline file or the ledger gives, bounded by what it defines. No
run id, no error text, no path ever becomes a label (an error may quote a secret; a run
id is a new series every run).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..ledger.consuming import SHOWN_STATUSES, LedgerFigures

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
QUEUE_STATES = ("pending", "processing", "dead")
STAGE = ("pipeline", "stage")


@dataclass(frozen=True)
class Family:
    """One metric family: its name, help text, type and label names."""

    name: str
    help: str
    labels: tuple[str, ...] = ()
    type: str = "gauge"


# every family the exposition can hold (tests and the docs' dashboard check against this list)
FAMILIES = [
    Family("minikafka_stage_last_run_timestamp_seconds", "When the stage's latest run started (0: never ran).", STAGE),
    Family("minikafka_stage_last_run_status", "1 for the status of the stage's latest run, 0 for the others "
           "(running, succeeded, failed, partial, interrupted, unknown: running on another host, not checkable).", (*STAGE, "status")),
    Family("minikafka_stage_last_run_duration_seconds", "How long the stage's latest run took.", STAGE),
    Family("minikafka_stage_last_run_in_rows", "Rows the stage's latest run read.", STAGE),
    Family("minikafka_stage_last_run_out_rows", "Rows the stage's latest run wrote.", STAGE),
    Family("minikafka_stage_last_run_duplicate_rows", "Output rows of the latest run dropped as duplicates.", STAGE),
    Family("minikafka_stage_last_run_failed_rows", "Input rows of the latest run that failed and stay pending.",
           STAGE),
    Family("minikafka_stage_last_run_quarantined_rows", "Rows the stage's latest run quarantined.", STAGE),
    Family("minikafka_stage_runs_total", "Runs of the stage in the run log by final status (succeeded, failed, "
           "partial, interrupted; a run whose process is gone counts as interrupted). Pruning the run log "
           "lowers it, which Prometheus takes as a counter reset.", (*STAGE, "status"), "counter"),
    Family("minikafka_stage_last_success_timestamp_seconds", "When the stage's latest succeeded run ended "
           "(0: never).", STAGE),
    Family("minikafka_stage_last_failure_timestamp_seconds", "When the stage's latest failed or interrupted run "
           "ended (0: never).", STAGE),
    Family("minikafka_stage_last_interrupted_timestamp_seconds", "When the stage's latest interrupted run ended "
           "(0: never).", STAGE),
    Family("minikafka_topic_rows", "Rows the topic holds.", ("topic",)),
    Family("minikafka_topic_appended_rows_total", "Rows ever appended to the topic (its highest id; "
           "retention does not lower it).", ("topic",), "counter"),
    Family("minikafka_topic_newest_row_timestamp_seconds", "When the topic's newest row was appended (0: empty).",
           ("topic",)),
    Family("minikafka_consumer_lag_rows", "Rows of the topic pending for the consumer.", ("topic", "consumer")),
    Family("minikafka_queue_jobs", "Jobs of the work queue by state (dead: in its dead letter).",
           ("queue", "topic", "consumer", "state")),
    Family("minikafka_quarantine_rows", "Rows in the topic's quarantine.", ("topic",)),
    Family("minikafka_quarantined_rows_total", "Rows ever quarantined in the ledger, all topics (requeues "
           "and purges do not lower it).", (), "counter"),
    Family("minikafka_ledger_file_bytes", "Size of the ledger file."),
    Family("minikafka_ledger_wal_bytes", "Size of the ledger's -wal file (0: none)."),
    Family("minikafka_backup_last_success_timestamp_seconds", "When the latest succeeded backup of the ledger "
           "ended (0: never)."),
    Family("minikafka_backup_newest_snapshot_timestamp_seconds", "When the newest snapshot of this ledger in the "
           "pipeline's [health] backups directory was taken (0: none there)."),
    Family("minikafka_backup_snapshots", "Snapshots of this ledger in the pipeline's [health] backups directory."),
]
BY_NAME = {f.name: f for f in FAMILIES}


def escape_label(value: str) -> str:
    """A label value as the text format writes it (backslash, double quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_value(value: float | int | None) -> str:
    if value is None:
        return "NaN"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def _samples(figures: LedgerFigures, pipeline_of: Mapping[str, str]) -> dict[str, list[tuple[tuple, object]]]:
    out: dict[str, list[tuple[tuple, object]]] = {f.name: [] for f in FAMILIES}

    def add(name: str, labels: tuple, value) -> None:
        out[name].append((labels, value))

    for s in figures.stages:
        key = (pipeline_of.get(s.stage, ""), s.stage)
        add("minikafka_stage_last_run_timestamp_seconds", key, s.last_started or 0)
        for status in SHOWN_STATUSES:
            add("minikafka_stage_last_run_status", (*key, status), int(s.last_status == status))
        if s.last_status is not None:
            if s.last_duration_s is not None:  # a run still running (or recorded without one) has none
                add("minikafka_stage_last_run_duration_seconds", key, s.last_duration_s)
            add("minikafka_stage_last_run_in_rows", key, s.rows_in)
            add("minikafka_stage_last_run_out_rows", key, s.rows_out)
            add("minikafka_stage_last_run_duplicate_rows", key, s.rows_duplicate)
            add("minikafka_stage_last_run_failed_rows", key, s.rows_failed)
            add("minikafka_stage_last_run_quarantined_rows", key, s.rows_quarantined)
        for status, n in s.runs.items():
            add("minikafka_stage_runs_total", (*key, status), n)
        add("minikafka_stage_last_success_timestamp_seconds", key, s.last_success or 0)
        add("minikafka_stage_last_failure_timestamp_seconds", key, s.last_failure or 0)
        add("minikafka_stage_last_interrupted_timestamp_seconds", key, s.last_interrupted or 0)
    for t in figures.topics:
        add("minikafka_topic_rows", (t.topic,), t.rows)
        add("minikafka_topic_appended_rows_total", (t.topic,), t.appended)
        add("minikafka_topic_newest_row_timestamp_seconds", (t.topic,), t.newest_row or 0)
    for c in figures.consumers:
        add("minikafka_consumer_lag_rows", (c.topic, c.consumer), c.lag)
    for q in figures.queues:
        name = q.topic if q.topic == q.consumer else f"{q.topic}:{q.consumer}"
        for state in QUEUE_STATES:
            add("minikafka_queue_jobs", (name, q.topic, q.consumer, state), getattr(q, state))
    quarantined = dict.fromkeys((t.topic for t in figures.topics), 0) | dict(figures.quarantined)
    for topic in sorted(quarantined):
        add("minikafka_quarantine_rows", (topic,), quarantined[topic])
    add("minikafka_quarantined_rows_total", (), figures.quarantined_ever)
    add("minikafka_ledger_file_bytes", (), figures.file_bytes)
    add("minikafka_ledger_wal_bytes", (), figures.wal_bytes)
    add("minikafka_backup_last_success_timestamp_seconds", (), figures.last_backup or 0)
    if figures.snapshots is not None:
        add("minikafka_backup_newest_snapshot_timestamp_seconds", (), figures.newest_snapshot or 0)
        add("minikafka_backup_snapshots", (), figures.snapshots)
    return out


def render(figures: LedgerFigures, pipeline_of: Mapping[str, str] | None = None) -> str:
    """The exposition text of ``figures``; ``pipeline_of`` maps a stage to its pipeline's name
    (a stage it does not name gets ``pipeline=""``, which Prometheus reads as no label)."""
    samples = _samples(figures, pipeline_of or {})
    lines: list[str] = []
    for family in FAMILIES:
        rows = samples[family.name]
        if not rows:
            continue
        lines.append(f"# HELP {family.name} {family.help}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for labels, value in rows:
            lines.append(f"{family.name}{_labels(family.labels, labels)} {format_value(value)}")
    return "\n".join(lines) + "\n"


def _labels(names: Iterable[str], values: Iterable[str]) -> str:
    pairs = [f'{n}="{escape_label(str(v))}"' for n, v in zip(names, values)]
    return "{" + ",".join(pairs) + "}" if pairs else ""

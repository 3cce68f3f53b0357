"""The figures health checks read from the ledger, each at a cost that does not grow with history.

- stage runs: the latest run and the latest successful run of a stage (the run log's
  ``(stage, started_at)`` index);
- topic freshness: when its newest row was appended (the last row by id);
- lag: rows pending for a consumer, from its positions and the topic's row marks
  (``counts.pending_counts``), never a count over the rows;
- quarantine: rows in a topic's quarantine (its ``(topic, id)`` index);
- queues: dead jobs, and when the oldest pending job's row was appended;
- health runs: the check states the last notified health run recorded.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from ..topics import acks, counts
from ..topics.catalog import catalog_row, read_layout
from ..topics.layout import META_COLUMNS
from ..topics.table import TopicTable
from . import queues
from .runlog import COLUMNS, settled

CREATED_AT = META_COLUMNS.index("_created_at")  # where a select_sql row holds it


def topic_exists(conn: sqlite3.Connection, topic: str) -> bool:
    return catalog_row(conn, topic) is not None


def latest_run(conn: sqlite3.Connection, stage: str) -> dict[str, Any] | None:
    """The stage's most recent run (status, times, counts), or None; a 'running' run whose
    process is gone reads 'interrupted' (``runlog.settled``)."""
    row = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM _minikafka_runs WHERE stage = ? "
                       "ORDER BY started_at DESC, rowid DESC LIMIT 1", (stage,)).fetchone()
    return None if row is None else settled(dict(zip(COLUMNS, row)))


def latest_success(conn: sqlite3.Connection, stage: str) -> tuple[str, str] | None:
    """(run id, finished_at) of the stage's most recent succeeded run, or None."""
    row = conn.execute("SELECT run_id, coalesce(finished_at, started_at) FROM _minikafka_runs "
                       "WHERE stage = ? AND status = 'succeeded' ORDER BY started_at DESC, rowid DESC LIMIT 1",
                       (stage,)).fetchone()
    return None if row is None else (row[0], row[1])


def stages_in_runlog(conn: sqlite3.Connection) -> list[str]:
    """Names of the stages the run log has stage runs of, sorted."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT stage FROM _minikafka_runs WHERE kind = 'stage' AND stage IS NOT NULL ORDER BY stage")]


def _table(conn: sqlite3.Connection, topic: str) -> TopicTable | None:
    return TopicTable(conn, read_layout(conn, topic)) if topic_exists(conn, topic) else None


def newest_row_time(conn: sqlite3.Connection, topic: str) -> str | None:
    """When the topic's newest row was appended (ledger text form), None for an empty or unknown topic."""
    table = _table(conn, topic)
    row = table.row(table.high_watermark()) if table is not None else None
    return None if row is None else row[CREATED_AT]


def pending_for(conn: sqlite3.Connection, topic: str, consumer: str,
                partitions: Iterable[int] | None = None) -> int | None:
    """Rows of ``topic`` pending for consumer ``consumer`` (in ``partitions`` only, when given;
    None when the topic or the consumer is unknown), from its positions and the topic's row
    marks (``counts.pending_counts``): the cost does not grow with the lag."""
    table = _table(conn, topic)
    consumer_id = acks.find_consumer(conn, topic, consumer) if table is not None else None
    if consumer_id is None:
        return None
    pending = counts.pending_counts(conn, topic, consumer_id)
    wanted = pending if partitions is None else set(partitions)
    return sum(n for p, n in pending.items() if p in wanted)


def oldest_pending_time(conn: sqlite3.Connection, topic: str, consumer: str,
                        partitions: Iterable[int] | None = None) -> str | None:
    """When the oldest row of ``topic`` still pending for ``consumer`` (in ``partitions`` only,
    when given) was appended (ledger text form); None when nothing is pending or the topic or
    consumer is unknown. One step from the consumer's lowest position (``acks.pending_filter``)."""
    table = _table(conn, topic)
    consumer_id = acks.find_consumer(conn, topic, consumer) if table is not None else None
    if consumer_id is None:
        return None
    where, params = acks.pending_filter(consumer_id)
    if partitions is not None:
        wanted = [int(p) for p in partitions]
        where += f' AND "_partition" IN ({", ".join("?" for _ in wanted)})'
        params = (*params, *wanted)
    first = table.page(0, 1, where, params)
    return first[0][CREATED_AT] if first else None


def consumers_of(conn: sqlite3.Connection, topic: str) -> list[str]:
    """The consumers registered on ``topic`` (none for an unknown topic)."""
    return acks.consumer_names(conn, topic) if topic_exists(conn, topic) else []


def quarantined(conn: sqlite3.Connection, topic: str) -> int:
    """Rows in ``topic``'s quarantine."""
    return conn.execute("SELECT count(*) FROM _minikafka_quarantine WHERE topic = ?", (topic,)).fetchone()[0]


def queue_pairs(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(topic, consumer) of every queue in the ledger."""
    return queues.queue_pairs(conn)


def queue_figures(conn: sqlite3.Connection, topic: str, consumer: str) -> dict[str, Any] | None:
    """``{"dead": N, "oldest_pending_at": text | None}`` of a queue, or None when there is no such queue.

    The oldest pending job is the lowest row id among jobs waiting (a processing job whose
    lease ran out counts as waiting) and rows not yet turned into jobs; its age is that
    row's append time.
    """
    row = conn.execute("SELECT consumer_id, synced_upto FROM _minikafka_queues WHERE topic = ? AND consumer = ?",
                       (topic, consumer)).fetchone()
    if row is None:
        return None
    consumer_id, synced = row[0], row[1] or 0
    dead = queues.count_dead(conn, consumer_id, topic, consumer)
    first_job = conn.execute("SELECT min(row_id) FROM _minikafka_queue_jobs WHERE consumer_id = ? "
                             "AND state IN ('pending', 'processing')", (consumer_id,)).fetchone()[0]
    table = TopicTable(conn, read_layout(conn, topic))
    where, params = acks.pending_filter(consumer_id)
    unsynced = table.page(synced, 1, where, params)  # the first row not turned into a job yet
    candidates = [i for i in (first_job, unsynced[0][0] if unsynced else None) if i is not None]
    oldest = None
    if candidates:
        found = table.row(min(candidates))
        oldest = found[CREATED_AT] if found else None
    return {"dead": dead, "oldest_pending_at": oldest}


def last_notified_states(conn: sqlite3.Connection, scope: str, *, look_back: int = 200) -> dict[str, str] | None:
    """The check states of the latest health run of ``scope`` whose notification went out
    (or that had nothing to send), None when there is none."""
    rows = conn.execute("SELECT details FROM _minikafka_runs WHERE stage = 'health' "
                        "ORDER BY started_at DESC, rowid DESC LIMIT ?", (look_back,)).fetchall()
    for (text,) in rows:
        details = json.loads(text) if text else {}
        if details.get("scope") == scope and details.get("notified") is True:
            return dict(details.get("states") or {})
    return None

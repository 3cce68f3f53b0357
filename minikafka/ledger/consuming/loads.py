"""Backfill progress: which dumps a topic holds, and how far an interrupted load got.

One row per (topic, content hash) in ``_minikafka_loads`` (DDL in ``schema.py``). A load
moves ``rows_done`` (the last line committed) in the same transaction as the rows it
commits, so a killed backfill re-run skips exactly what is stored; a finished load is
``done`` and its file is skipped by its hash. A gzip file is recorded under the hash of
its content and of its bytes, so a re-compressed copy of a loaded dump is known too.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

PARTIAL = "partial"
DONE = "done"


def load_states(conn: sqlite3.Connection, topic: str) -> dict[str, tuple[int, str]]:
    """{content hash: (rows done, 'partial' | 'done')} of every file loaded (or begun) into ``topic``."""
    return {sha: (rows, status) for sha, rows, status in conn.execute(
        "SELECT sha256, rows_done, status FROM _minikafka_loads WHERE topic = ?", (topic,))}


def record_progress_in_current_transaction(conn: sqlite3.Connection, topic: str, sha256: str, file: str,
                                           rows_done: int, run_id: str, now: str) -> None:
    """The file's lines up to ``rows_done`` are committed (with the caller's transaction)."""
    conn.execute(
        "INSERT INTO _minikafka_loads (topic, sha256, file, rows_done, status, run_id, updated_at) "
        "VALUES (?, ?, ?, ?, 'partial', ?, ?) ON CONFLICT (topic, sha256) DO UPDATE SET "
        "rows_done = excluded.rows_done, updated_at = excluded.updated_at",
        (topic, sha256, file, rows_done, run_id, now))


def mark_done_in_current_transaction(conn: sqlite3.Connection, topic: str, files: Iterable[tuple[str, str]],
                                     run_id: str, now: str) -> None:
    """Every (hash, file name) in ``files`` is fully loaded: a later backfill skips it."""
    conn.executemany(
        "INSERT INTO _minikafka_loads (topic, sha256, file, rows_done, status, run_id, updated_at) "
        "VALUES (?, ?, ?, 0, 'done', ?, ?) ON CONFLICT (topic, sha256) DO UPDATE SET status = 'done', "
        "run_id = excluded.run_id, updated_at = excluded.updated_at",
        [(topic, sha, name, run_id, now) for sha, name in files])

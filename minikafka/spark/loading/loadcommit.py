"""Backfill's commit: a dump's checked rows into its topic, in line order, in bounded
transactions; each inserts its rows (duplicates of the dedup key skipped), quarantines
its refused lines and records the file's progress (``ledger/loads.py``), so a killed
backfill re-run skips exactly what is stored.

Rows arrive in one of two forms, both cut into slices of at most ``batch_rows``
accepted rows (:class:`Slice`):

- row files (``ledger.rowfiles``: a JSONL dump's chunks): the ledger attaches each and
  inserts a slice with one ``INSERT ... SELECT``, no Python per row;
- Arrow batches (CSV and Parquet files staged by Spark as Parquet): inserted with
  ``executemany``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import repeat

from ...api.source import Source
from ...ledger import acks, bulk, loads, rowfiles
from ...ledger.layout import TopicLayout
from ...ledger.quarantine import Quarantined, quarantine_in_current_transaction
from ...ledger.runlog import RunResult
from ...ledger.table import TopicTable, insert_params_of_columns
from ...util.clock import utc_now
from ...util.gcpause import gc_paused
from .parts import check_count


@dataclass
class Slice:
    """Consecutive lines of one file: how many were read, the last of them, its accepted
    rows (``insert`` stores them with the caller's transaction and returns how many were
    stored) and its refused lines as (line, error, payload)."""

    rows_read: int
    last_line: int
    accepted: int
    refused: list[tuple[int, str, str | None]]
    now: str
    insert: Callable[[sqlite3.Connection, int], int] | None  # (conn, highest id before) -> rows stored
    committed_before: bool = False  # every line of it was committed by an interrupted run


def arrow_slices(batches: Iterable, layout: TopicLayout, batch_rows: int, already: int,
                 run_id: str) -> Iterator[Slice]:
    """Slices of Arrow batches of storage values with ``_mk_line``, ``_mk_error`` and
    ``_mk_payload`` (``rowcheck``), in line order; lines up to ``already`` are left out."""
    import pyarrow.compute as pc

    names = layout.field_names
    for whole in batches:
        for start in range(0, whole.num_rows, batch_rows):
            batch = whole.slice(start, batch_rows)
            last_line = batch.column("_mk_line")[-1].as_py()
            if last_line <= already:
                yield Slice(batch.num_rows, last_line, 0, [], "", None, committed_before=True)
                continue
            now = utc_now()
            fresh = pc.greater(batch.column("_mk_line"), already)
            has_error = pc.is_valid(batch.column("_mk_error"))
            kept = batch.filter(pc.and_(fresh, pc.invert(has_error)))
            failed = batch.filter(pc.and_(fresh, has_error))
            n = kept.num_rows
            params = insert_params_of_columns([kept.column(c).to_pylist() for c in names], n, now,
                                              (repeat(None, n), repeat(None, n), repeat(run_id, n)))
            refused = list(zip(failed.column("_mk_line").to_pylist(), failed.column("_mk_error").to_pylist(),
                               failed.column("_mk_payload").to_pylist()))

            def insert(conn, top, params=params):
                return TopicTable(conn, layout).insert_params_in_current_transaction(
                    params, lineage=True, ignore_duplicates=bool(layout.dedup), after=top)

            yield Slice(batch.num_rows, last_line, n, refused, now, insert)


def row_file_slices(source: Source, parts: Iterable[tuple[str, int]], layout: TopicLayout, batch_rows: int,
                    already: int, run_id: str) -> Iterator[Slice]:
    """Slices of row files ((local path, rows its task reported) each, in line order),
    each file attached to the ledger while its slices are committed; lines up to
    ``already`` are left out.

    Raises:
        StagingError: a part is missing, unreadable or holds other than its task reported.
    """
    conn = source.ledger.conn
    for path, reported in parts:
        with rowfiles.attached(conn, path, layout) as rows:
            check_count(path, rows.rows + rows.refused, reported)
            for piece in rows.slices(batch_rows, after_line=already):
                now = utc_now()

                def insert(conn, top, piece=piece, now=now):
                    return TopicTable(conn, layout).insert_row_file_in_current_transaction(rows, piece, now, run_id)

                yield Slice(piece.rows_read, piece.last_line, piece.accepted, piece.refused, now, insert)


@contextmanager
def closing_slices(slices: Iterable[Slice]) -> Iterator[None]:
    """Close ``slices`` after the block, on failure too: a row file is detached at once,
    outside any transaction."""
    try:
        yield
    finally:
        close = getattr(slices, "close", None)
        if close is not None:
            close()


def commit_slices(source: Source, layout: TopicLayout, file_name: str, sha256: str, slices: Iterable[Slice],
                  run: RunResult, result, *, as_handled: bool, progress) -> None:
    """Commit each slice in its own transaction, with its quarantined lines and the file's
    progress; count into ``run`` and ``result`` (``rows_read``)."""
    from ...util.faults import checkpoint

    t0 = time.perf_counter()
    rows = run.details.get("transaction_rows", 0)
    with bulk.page_cache(source.ledger.conn, layout.name, extra_bytes=rows * 512), closing_slices(slices):
        for piece in slices:
            result.rows_read += piece.rows_read
            if piece.committed_before:
                continue
            t1 = time.perf_counter()
            now = piece.now
            with gc_paused(), source.ledger.atomic() as conn:
                top = conn.execute(f'SELECT max("_id") FROM {layout.table}').fetchone()[0] or 0
                inserted = piece.insert(conn, top) if piece.accepted else 0
                if as_handled and inserted:
                    acks.mark_appended_handled_in_current_transaction(conn, layout.name, top, now)
                quarantine_in_current_transaction(conn, (
                    Quarantined(layout.name, payload, error, f"{file_name}:{line}", now, run_id=run.run_id)
                    for line, error, payload in piece.refused))
                loads.record_progress_in_current_transaction(conn, layout.name, sha256, file_name, piece.last_line,
                                                             run.run_id, now)
            run.details["commit_seconds"] = round(run.details.get("commit_seconds", 0) + time.perf_counter() - t1,
                                                  2)
            checkpoint("backfill:batch-committed")
            run.rows_out += inserted
            run.rows_duplicate += piece.accepted - inserted
            run.rows_quarantined += len(piece.refused)
            run.rows_in += piece.accepted + len(piece.refused)
            if progress:
                progress(f"  {file_name}: line {piece.last_line:,} — loaded {run.rows_out:,}, duplicates "
                         f"{run.rows_duplicate:,}, quarantined {run.rows_quarantined:,} "
                         f"({time.perf_counter() - t0:.1f} s)")

"""Backfill's slices: a dump's checked rows cut out of Spark's output, in line order, into
slices of at most ``batch_rows`` accepted rows (``ledger.commit.LoadSlice``) that
``ledger.commit.commit_slices`` commits, one transaction each.

Rows arrive in one of two forms:

- row files (``ledger.rowfiles``: a JSONL dump's chunks): the ledger attaches each and
  inserts a slice with one ``INSERT ... SELECT``, no Python per row;
- Arrow batches (CSV and Parquet files staged by Spark as Parquet): inserted with
  ``executemany``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import repeat

from ...api.source import Source
from ...ledger import keys, rowfiles
from ...ledger.commit import LoadSlice
from ...ledger.layout import TopicLayout
from ...ledger.table import TopicTable, insert_params_of_columns
from ...util.clock import utc_now
from .parts import check_count


def arrow_slices(batches: Iterable, layout: TopicLayout, batch_rows: int, already: int,
                 run_id: str) -> Iterator[LoadSlice]:
    """Slices of Arrow batches of storage values with ``_mk_line``, ``_mk_error`` and
    ``_mk_payload`` (``rowcheck``), in line order; lines up to ``already`` are left out."""
    import pyarrow.compute as pc

    names = layout.field_names
    for whole in batches:
        for start in range(0, whole.num_rows, batch_rows):
            batch = whole.slice(start, batch_rows)
            last_line = batch.column("_mk_line")[-1].as_py()
            if last_line <= already:
                yield LoadSlice(batch.num_rows, last_line, 0, [], "", None, committed_before=True)
                continue
            now = utc_now()
            fresh = pc.greater(batch.column("_mk_line"), already)
            has_error = pc.is_valid(batch.column("_mk_error"))
            kept = batch.filter(pc.and_(fresh, pc.invert(has_error)))
            failed = batch.filter(pc.and_(fresh, has_error))
            n = kept.num_rows
            hashes = keys.arrow_hashes(layout, kept) if layout.dedup and n else None  # not per row in SQL
            params = insert_params_of_columns([kept.column(c).to_pylist() for c in names], n, now,
                                              (repeat(None, n), repeat(None, n), repeat(run_id, n)),
                                              None if hashes is None else hashes.tolist())
            refused = list(zip(failed.column("_mk_line").to_pylist(), failed.column("_mk_error").to_pylist(),
                               failed.column("_mk_payload").to_pylist()))

            def insert(conn, top, params=params, keyed=hashes is not None):
                return TopicTable(conn, layout).insert_params_in_current_transaction(
                    params, lineage=True, ignore_duplicates=bool(layout.dedup), after=top, keyed=keyed)

            yield LoadSlice(batch.num_rows, last_line, n, refused, now, insert)


def row_file_slices(source: Source, parts: Iterable[tuple[str, int]], layout: TopicLayout, batch_rows: int,
                    already: int, run_id: str) -> Iterator[LoadSlice]:
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

                yield LoadSlice(piece.rows_read, piece.last_line, piece.accepted, piece.refused, now, insert)

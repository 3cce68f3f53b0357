"""Backfill's slices: a dump's checked rows cut out of Spark's output, in line order, into
slices of at most ``batch_rows`` accepted rows (``ledger.transactions.commit.LoadSlice``) that
``ledger.transactions.commit.commit_slices`` commits, one transaction each.

Rows arrive in one of two forms:

- row files (``ledger.topics.rowfiles``: a JSONL dump's chunks): the ledger attaches up to
  ``rowfiles.MAX_ATTACHED`` at once and inserts a slice with one ``INSERT ... SELECT`` per
  file it spans, no Python per row;
- Arrow batches (CSV and Parquet files staged by Spark as Parquet): inserted with
  ``executemany``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from itertools import repeat

from ...api.source import Source
from ...ledger.topics import TopicLayout, TopicTable, insert_params_of_columns, keys, rowfiles
from ...ledger.transactions import LoadSlice
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
                    already: int, run_id: str, *, files: int = rowfiles.MAX_ATTACHED,
                    commit_now: Callable[[], bool] | None = None) -> Iterator[LoadSlice]:
    """Slices of row files ((local path, rows its task reported) each, in line order); lines
    up to ``already`` are left out.

    A slice (one transaction) holds at most ``batch_rows`` accepted rows, taken from up to
    ``files`` consecutive files attached to the ledger at once: a transaction is as large
    as the key index wants (``bulk.transaction_rows``) while the files stay as small as
    Spark's chunks. A file is detached once every row of it is committed (or the slices
    are closed); a path given by ``parts`` must stay readable until ``files`` more were
    given. ``commit_now``: asked after each file; True commits what is gathered at once
    (``ChunkJobs.last_running``: the last parts are still being validated, so the rows
    gathered are committed while Spark runs, not after it).

    Raises:
        StagingError: a part is missing, unreadable or holds other than its task reported.
    """
    if not 1 <= files <= rowfiles.MAX_ATTACHED:
        raise ValueError(f"files must be 1 to {rowfiles.MAX_ATTACHED}, got {files!r}")
    conn = source.ledger.conn
    held: list[tuple[rowfiles.RowFile, ExitStack]] = []  # attached, in line order
    group: list[tuple[rowfiles.RowFile, rowfiles.Slice]] = []  # the next transaction's pieces

    def release(keep: rowfiles.RowFile | None = None, only: rowfiles.RowFile | None = None) -> None:
        """Detach the held files (``only`` that one; all but ``keep``): nothing of them is left to commit."""
        for entry in [h for h in held if h[0] is not keep and (only is None or h[0] is only)]:
            held.remove(entry)
            entry[1].close()

    try:
        for path, reported in parts:
            stack = ExitStack()
            in_use = {rows.alias for rows, _ in held}
            alias = next(a for a in map(rowfiles.numbered_alias, range(files)) if a not in in_use)
            rows = stack.enter_context(rowfiles.attached(conn, path, layout, alias))
            held.append((rows, stack))
            check_count(path, rows.rows + rows.refused, reported)
            after = already
            room = batch_rows - sum(piece.accepted for _rows, piece in group)
            while (piece := rows.next_slice(room, after)) is not None:
                group.append((rows, piece))
                after, room = piece.last_line, room - piece.accepted
                if room <= 0:
                    yield _group_slice(group, layout, run_id)
                    group, room = [], batch_rows
                    release(keep=rows)
            if not any(r is rows for r, _piece in group):
                release(only=rows)  # none of it waits for a commit
            elif len(held) == files or (commit_now is not None and commit_now()):
                # no alias left for the next file, or no reason to wait for it: commit what is gathered
                yield _group_slice(group, layout, run_id)
                group = []
                release()
        if group:
            yield _group_slice(group, layout, run_id)
            group = []
    finally:
        for _rows, stack in reversed(held):
            stack.close()


def _group_slice(group: list, layout: TopicLayout, run_id: str) -> LoadSlice:
    """One transaction's pieces ((row file, slice) each, in line order) as one ``LoadSlice``."""
    now = utc_now()
    pieces = list(group)

    def insert(conn, top):
        table = TopicTable(conn, layout)
        return sum(table.insert_row_file_in_current_transaction(rows, piece, now, run_id) for rows, piece in pieces)

    return LoadSlice(sum(p.rows_read for _r, p in pieces), pieces[-1][1].last_line, sum(p.accepted for _r, p in pieces),
                     [line for _r, p in pieces for line in p.refused], now, insert)

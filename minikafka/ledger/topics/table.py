"""TopicTable: the one reader and writer of a topic's rows (its table), model-free.

A topic's layout on a connection. Every statement on the rows of a topic table is here:

- inserts of encoded rows, of Arrow batches (a stage's staged output) and of row files
  (backfill's JSONL chunks), with one builder of the insert parameters (field values,
  ``_created_at``, lineage when asked, ``_partition`` when the topic has several) and one
  explanation of a refused write (row, field, dedup key);
- reads: rows by id, pages by offset (``_id > after``, id order), counts, the high
  watermark, the rows pending for a consumer and the bounds of a read.

Nothing here commits: writes run inside the caller's transaction (``Ledger.atomic``) and a
failed write raises with nothing of it stored. Conditions (``where``) come from the ledger's
own builders (``acks.pending_filter``, ``filters.where_clause``): they hold validated
identifiers and ``?`` marks, their values travel as parameters. ``TopicRows``
(``api/core/rows.py``) keeps what needs the model (validation, encoding, records, events)
and stores through this class.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from ...errors import InvalidSettingError
from . import acks, bulk, counts, keys
from .identifiers import quote_identifier
from .layout import META_SELECT, PARTITION, STORED_META, TopicLayout, stored_meta

PAGE = 1000
BULK_ROWS = 10_000  # a write of this many rows or more gets a page cache sized by the key index (bulk.py)
PARENT = "_parent_id"
PARENT_TOPIC = "_parent_topic"
WHICH = ("new", "handled", "all")


@dataclass(frozen=True)
class ReadBounds:
    """What a read covers: ids in (0, upto], a status condition, and how many rows match."""

    topic: str
    upto: int
    lowest: int
    rows: int
    where: str  # holds only integers the ledger produced and validated names
    partitions: tuple[int, ...] | None = None  # topic partitions read (None: all)
    consumer_pending: bool = False  # the rows pending for a consumer (all 'new' by definition)


def partition_predicates(partitions: Iterable[int]) -> list[str]:
    """One condition per topic partition, for a reader that splits a query by predicates (Spark's JDBC source)."""
    return [f'"{PARTITION}" = {int(p)}' for p in partitions]


def id_range_predicates(cuts: Sequence[int]) -> list[str]:
    """Conditions splitting the ids at ``cuts`` (ascending): below the first, between each two, from the last."""
    cuts = [int(c) for c in cuts]
    return ([f'"_id" < {cuts[0]}'] + [f'"_id" >= {a} AND "_id" < {b}' for a, b in zip(cuts, cuts[1:])]
            + [f'"_id" >= {cuts[-1]}'])


def insert_params(rows: Iterable[tuple], now: str, lineage: Iterable[tuple] | tuple | None = None) -> list[tuple]:
    """The parameters of an insert (``TopicLayout.insert_sql``) of rows of encoded field
    values: each row's values, ``_created_at``, then its lineage when given ((parent id,
    parent topic, run id): one tuple for every row, or one per row). The partition of a
    partitioned topic is added by the insert (:meth:`TopicTable.insert_params_in_current_transaction`)."""
    if lineage is None:
        tail = (now,)
    elif isinstance(lineage, tuple):
        tail = (now, *lineage)
    else:
        return [r + (now, *line) for r, line in zip(rows, lineage)]
    return [r + tail for r in rows]


def insert_params_of_columns(columns: Sequence[Sequence], n: int, now: str,
                             lineage: tuple[Iterable, Iterable, Iterable] | None = None,
                             hashes: Iterable[int] | None = None) -> list[tuple]:
    """As :func:`insert_params` from ``n`` rows given as columns (the fields', then the
    lineage's: parent ids, parent topics, run ids), built by zip in C, no Python per row.
    ``hashes``: the rows' dedup hashes (``keys.arrow_hashes``), for ``insert_sql(keyed=True)``."""
    tail = [repeat(now, n)] + (list(lineage) if lineage is not None else []) + ([hashes] if hashes is not None else [])
    return list(zip(*columns, *tail))


def _with_python_hashes(layout: TopicLayout, params: list[tuple]) -> tuple[bool, list[tuple]]:
    """(True, ``params`` each with its dedup hash appended, as ``insert_sql(keyed=True)``
    takes them) when Python can hash every row's dedup values as SQL would
    (``keys.row_hashes``: a third of the SQL function's cost per row); else (False, ``params``)."""
    hashes = keys.row_hashes(layout, params)
    if hashes is None or None in hashes:
        return False, params
    return True, [p + (h,) for p, h in zip(params, hashes)]


class TopicTable:
    """The rows of one topic table on one connection (see the module docstring)."""

    __slots__ = ("conn", "layout")

    def __init__(self, conn: sqlite3.Connection, layout: TopicLayout):
        self.conn = conn
        self.layout = layout

    def __repr__(self) -> str:
        return f"TopicTable({self.layout.name!r})"

    # -- writing (in the caller's transaction) -----------------------------------------
    def insert_one_in_current_transaction(self, values: tuple, now: str, *, lineage: tuple | None = None,
                                          ignore_duplicates: bool = False,
                                          partition: int | None = None) -> tuple[int | None, int]:
        """INSERT one row of encoded field ``values``; (its id, or None when ignored as a
        duplicate; its partition). ``partition``: the caller's choice (else routed).

        Raises:
            DuplicateMessageError, InvalidRecordError: the row cannot be stored (nothing is).
        """
        layout = self.layout
        if lineage is None:
            params = (*values, now)
        else:
            params = (*values, now, *lineage)
        if layout.partitions > 1:
            if partition is None:
                partition = layout.route(values, 0 if layout.key else self.high_watermark() + 1)
            params += (partition,)
        else:
            partition = 0
        top = self.high_watermark() if layout.dedup else 0
        try:
            cur = self.conn.execute(layout.insert_sql(lineage=lineage is not None,
                                                      ignore_duplicates=ignore_duplicates), params)
        except (sqlite3.IntegrityError, OverflowError) as exc:
            if not self._collision(exc, [values], top):
                raise self.explain(exc, [values]) from None
            cur = None
        if cur is not None and cur.rowcount == 0:
            return None, partition
        if layout.dedup:
            row_id = self.high_watermark()
            if row_id <= top:  # its hash belongs to other values (an upsert of that row, or refused)
                if not keys.settle_in_current_transaction(self.conn, layout, [params], lineage=lineage is not None):
                    return None, partition
                row_id = self.high_watermark()
        else:
            row_id = cur.lastrowid
        counts.note_appended_in_current_transaction(self.conn, layout.name, partitions=layout.partitions,
                                                    top=row_id)
        return row_id, partition

    def _collision(self, exc: Exception, rows: list, top: int) -> bool:
        """Whether ``exc``, raised by an insert of ``rows`` (field values first) that does not
        skip duplicates, is a collision of dedup hashes rather than a duplicate (keys.py)."""
        if not self.layout.dedup or getattr(exc, "sqlite_errorname", "") != "SQLITE_CONSTRAINT_UNIQUE":
            return False
        return self.layout._find_duplicate(rows, self.conn, top) is None

    def insert_params_in_current_transaction(self, params: list[tuple], *, lineage: bool,
                                             ignore_duplicates: bool = False, after: int | None = None,
                                             row_offset: int = 0, keyed: bool = False) -> int:
        """INSERT rows built by :func:`insert_params` or :func:`insert_params_of_columns`, in
        order; returns how many were stored (duplicates of the dedup key skipped when
        ``ignore_duplicates``). A partitioned topic's rows get their partition here: routed by
        key, or spread by their expected id (``after``: the high watermark, read when not given).
        ``keyed``: each row carries its dedup hash after its lineage (``hashes`` of
        :func:`insert_params_of_columns`), so SQL does not compute it.

        Raises:
            DuplicateMessageError, InvalidRecordError: a row cannot be stored; names it
                (``row_offset``: rows of the same write before these); nothing of it is stored.
        """
        return self._insert_params(params, lineage=lineage, ignore_duplicates=ignore_duplicates, after=after,
                                   row_offset=row_offset, keyed=keyed)[0]

    def _insert_params(self, params: list[tuple], *, lineage: bool, ignore_duplicates: bool, after: int | None,
                       row_offset: int, keyed: bool) -> tuple[int, bool]:
        """As :meth:`insert_params_in_current_transaction`; (rows stored, whether rows were
        settled one by one after a hash collision, so their ids do not follow ``params``' order)."""
        settled = False
        conn = self.conn
        layout = self.layout
        if after is None and (layout.partitions > 1 or layout.dedup):
            after = self.high_watermark()
        keyed = keyed and bool(layout.dedup)
        if layout.dedup and not keyed and isinstance(params, list) and len(params) > 1:
            keyed, params = _with_python_hashes(layout, params)
        if layout.partitions > 1:
            params = layout.with_partitions(params, after + 1)
        before = conn.total_changes
        many = len(params) if layout.dedup and isinstance(params, list) else 0
        try:
            # a large write lands on random leaves of the key index: a cache that holds the index
            # and the rows being written keeps them from being spilled and read again (bulk.py)
            with bulk.page_cache(conn, layout.name, extra_bytes=many * bulk.ROW_BYTES) if many >= BULK_ROWS \
                    else nullcontext():
                conn.executemany(layout.insert_sql(lineage=lineage, ignore_duplicates=ignore_duplicates,
                                                   keyed=keyed), params)
        except (sqlite3.IntegrityError, OverflowError) as exc:
            if not self._collision(exc, params, after):
                raise self.explain(exc, params, existing_upto=after, row_offset=row_offset) from None
            keys.settle_in_current_transaction(conn, layout, layout.unkeyed(params, lineage=lineage) if keyed
                                               else params, lineage=lineage)
            settled = True
        written = conn.total_changes - before
        if layout.dedup:
            top = self.high_watermark()
            if keys.collided(conn, before, after, top):
                keys.settle_in_current_transaction(conn, layout, layout.unkeyed(params, lineage=lineage) if keyed
                                                   else params, lineage=lineage)
                top = self.high_watermark()
                settled = True
            written = top - after
        if written:
            counts.note_appended_in_current_transaction(conn, self.layout.name, partitions=self.layout.partitions)
        return written, settled

    def insert_rows_in_current_transaction(self, rows: list[tuple], now: str, *,
                                           lineage: Iterable[tuple] | tuple | None = None,
                                           ignore_duplicates: bool = False) -> int:
        """Rows of encoded field values inserted in order (lineage as :func:`insert_params`
        takes it); returns how many were stored."""
        return self.insert_params_in_current_transaction(insert_params(rows, now, lineage), lineage=lineage is not None,
                                                         ignore_duplicates=ignore_duplicates)

    def insert_arrow_in_current_transaction(self, batches: Iterable[Any], now: str, run_id: str, *,
                                            default_parent_topic: str | None = None,
                                            stored_batch: Callable[[Any, int | None], None] | None = None,
                                            ) -> tuple[int, int]:
        """Arrow record batches of storage values (the topic's fields, optionally
        ``_parent_id`` and ``_parent_topic``), inserted batch by batch in order, duplicates of
        the dedup key skipped; returns (rows stored, rows skipped as duplicates).

        ``stored_batch(batch, first_id)``, when given, is called after each batch's insert:
        ``first_id`` is the id of its first row when every row of the batch was stored, in
        order, under consecutive ids (row i got ``first_id + i``); None when not (rows skipped
        as duplicates, a row stored out of order after a hash collision).

        Raises:
            DuplicateMessageError, InvalidRecordError: a row cannot be stored (names it).
        """
        names = self.layout.field_names
        ignore = bool(self.layout.dedup)
        stored = offset = 0
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            hashes = keys.arrow_hashes(self.layout, batch) if ignore else None
            schema_names = batch.schema.names
            if PARENT in schema_names:
                parent_col = batch.column(PARENT)
                parents = parent_col.to_pylist()
                if PARENT_TOPIC in schema_names:
                    parent_topics = batch.column(PARENT_TOPIC).to_pylist()
                elif parent_col.null_count == 0:
                    parent_topics = repeat(default_parent_topic, n)
                else:
                    parent_topics = [default_parent_topic if p is not None else None for p in parents]
            else:
                parents, parent_topics = repeat(None, n), repeat(None, n)
            params = insert_params_of_columns([batch.column(name).to_pylist() for name in names], n, now,
                                              (parents, parent_topics, repeat(run_id, n)),
                                              None if hashes is None else hashes.tolist())
            after = self.high_watermark()
            written, settled = self._insert_params(params, lineage=True, ignore_duplicates=ignore, after=after,
                                                   row_offset=offset, keyed=hashes is not None)
            stored += written
            offset += n
            if stored_batch is not None:  # every row stored, in order: ids after+1 .. after+n
                stored_batch(batch, after + 1 if written == n and not settled and
                             self.high_watermark() == after + n else None)
        return stored, offset - stored

    def insert_row_file_in_current_transaction(self, rows: Any, piece: Any, now: str, run_id: str) -> int:
        """A slice of an attached row file (``rowfiles.RowFile``, ``rowfiles.Slice``) appended
        in line order, so ids follow lines; duplicates of the dedup key skipped. A topic of one
        partition takes it in one ``INSERT ... SELECT`` (no Python per row); a partitioned one
        routes each row. Returns how many rows were stored."""
        layout = self.layout
        lineage = (None, None, run_id)
        if layout.partitions != 1:
            return self.insert_rows_in_current_transaction(rows.values(piece), now, lineage=lineage,
                                                           ignore_duplicates=bool(layout.dedup))
        if piece.last < piece.first:
            return 0
        extra = (keys.KEY,) if layout.dedup else ()
        names = ", ".join(quote_identifier(n) for n in (*layout.field_names, "_created_at", "_run_id", *extra))
        cols = rows.value_columns
        select = cols + (", " if cols else "") + "?, ?"
        if layout.dedup:  # the hash the writer computed, else computed here
            computed = layout.key_sql(cols.split(", "))
            select += ", " + (f"coalesce(k, {computed})" if rows.keyed else computed)
        tail = layout.upsert_sql() if layout.dedup else ""
        before = self.conn.total_changes
        top = self.high_watermark() if layout.dedup else 0
        try:
            self.conn.execute(
                f"INSERT INTO {layout.table} ({names}) SELECT {select} FROM {rows.table} "
                f"WHERE seq BETWEEN ? AND ? ORDER BY seq{tail}", (now, run_id, piece.first, piece.last))
        except sqlite3.Error as exc:  # named by row and field, as an executemany would be
            raise self.explain(exc, rows.values(piece)) from None
        written = self.conn.total_changes - before
        if layout.dedup:
            after = self.high_watermark()
            if keys.collided(self.conn, before, top, after):
                params = insert_params(rows.values(piece), now, (None, None, run_id))
                keys.settle_in_current_transaction(self.conn, layout, params, lineage=True)
                after = self.high_watermark()
            written = after - top
        if written:
            counts.note_appended_in_current_transaction(self.conn, layout.name, partitions=1)
        return written

    def replace_in_current_transaction(self, new_layout: TopicLayout, convert: Callable[[tuple], tuple]) -> None:
        """Rewrite every row under ``new_layout`` (a migration): ids, times, lineage and
        partitions kept, the field values ``convert(row)`` of each ``select_sql`` row; the
        table, its indexes, trigger and status views replaced. What ``convert`` raises
        propagates (the caller's transaction rolls back: nothing changed)."""
        conn, old = self.conn, self.layout
        tmp = quote_identifier(old.name + "__migrating")
        names = [*STORED_META, *new_layout.field_names, PARTITION]
        insert = (f"INSERT INTO {tmp} ({', '.join(quote_identifier(n) for n in names)}) "
                  f"VALUES ({', '.join('?' for _ in names)})")
        conn.execute(new_layout.ddl(old.name + "__migrating")[0])
        at = old.partition_index
        for page in self.scan():
            for row in page:
                conn.execute(insert, (*stored_meta(row), *convert(row), row[at]))
        for statement in old.drop_views_ddl():
            conn.execute(statement)
        conn.execute(f"DROP TABLE {old.table}")  # drops its trigger and indexes too
        conn.execute(f"ALTER TABLE {tmp} RENAME TO {new_layout.table}")
        if new_layout.dedup:  # the rows were copied without their dedup hash
            keys.fill_in_current_transaction(conn, new_layout)
        for statement in new_layout.ddl()[1:]:
            conn.execute(statement)

    def explain(self, exc: Exception, rows: list, *, existing_upto: int | None = None,
                row_offset: int = 0) -> Exception:
        """The minikafka error for an insert SQLite refused (``rows``: the insert's
        parameters or field values, field values first), naming the row and field."""
        return self.layout.explain_write_error(exc, rows, conn=self.conn, existing_upto=existing_upto,
                                               row_offset=row_offset)

    # -- reading -----------------------------------------------------------------------
    def high_watermark(self) -> int:
        """The largest id stored (0 for an empty topic)."""
        return self.conn.execute(f'SELECT max("_id") FROM {self.layout.table}').fetchone()[0] or 0

    def count(self, where: str = "1", params: tuple = ()) -> int:
        """How many rows match ``where``."""
        return self.conn.execute(f"SELECT count(*) FROM {self.layout.table} WHERE {where}", params).fetchone()[0]

    def summary(self, pending: str, params: tuple) -> tuple[int, int, int]:
        """(rows matching ``pending``, rows, high watermark), in one statement."""
        table = self.layout.table
        return self.conn.execute(
            f"SELECT (SELECT count(*) FROM {table} WHERE {pending}), count(*), coalesce(max(\"_id\"), 0) FROM {table}",
            params).fetchone()

    def row(self, row_id: int) -> tuple | None:
        """The ``select_sql`` row with id ``row_id`` (None when there is none)."""
        return self.conn.execute(f'{self.layout.select_sql()} WHERE "_id" = ?', (row_id,)).fetchone()

    def exists(self, row_id: int, where: str = "1", params: tuple = ()) -> bool:
        """Whether row ``row_id`` exists and matches ``where``."""
        return self.conn.execute(f'SELECT 1 FROM {self.layout.table} WHERE "_id" = ? AND {where}',
                                 (row_id, *params)).fetchone() is not None

    def rows_by_id(self, ids: list[int]) -> list[tuple]:
        """The ``select_sql`` rows with these ids (missing ids left out)."""
        marks = ", ".join("?" for _ in ids)
        return self.conn.execute(f'{self.layout.select_sql()} WHERE "_id" IN ({marks})', ids).fetchall()

    def ids_after(self, after: int) -> list[int]:
        """Ids above ``after``, in order."""
        return [r[0] for r in self.conn.execute(
            f'SELECT "_id" FROM {self.layout.table} WHERE "_id" > ? ORDER BY "_id"', (after,))]

    def first_after(self, after: int) -> int | None:
        """The lowest id above ``after`` (None when there is none)."""
        return self.conn.execute(f'SELECT min("_id") FROM {self.layout.table} WHERE "_id" > ?',
                                 (after,)).fetchone()[0]

    def subquery(self, bounds: ReadBounds, *, with_partition: bool = False) -> str:
        """The rows ``bounds`` covers as an aliased subquery, ``(SELECT ...) AS q``, for a reader that
        takes SQL text (Spark's JDBC source): the metadata columns (rows pending for a consumer are
        'new' by definition: no per-row status lookup), the fields, and ``_partition`` if asked."""
        meta = META_SELECT if bounds.consumer_pending else self.layout.meta_select()
        fields = ", ".join(quote_identifier(n) for n in self.layout.field_names)
        extra = f', "{PARTITION}"' if with_partition else ""
        return f"(SELECT {meta}, {fields}{extra} FROM {quote_identifier(self.layout.name)} WHERE {bounds.where}) AS q"

    @property
    def ids_select(self) -> str:
        """A ``select`` for :meth:`page` and :meth:`page_before` that reads the ids alone (whether rows exist)."""
        return f'SELECT "_id" FROM {self.layout.table}'

    def page(self, after: int, limit: int, where: str = "1", params: tuple = (), *,
             upto: int | None = None, select: str | None = None) -> list[tuple]:
        """Rows with id above ``after`` (and at most ``upto``) matching ``where``, id order, at
        most ``limit`` (-1: no limit). ``select``: the SELECT ... FROM the table, default
        ``layout.select_sql()``."""
        sql = select or self.layout.select_sql()
        if upto is None:
            return self.conn.execute(f'{sql} WHERE {where} AND "_id" > ? ORDER BY "_id" LIMIT ?',
                                     (*params, after, limit)).fetchall()
        return self.conn.execute(f'{sql} WHERE {where} AND "_id" > ? AND "_id" <= ? ORDER BY "_id" LIMIT ?',
                                 (*params, after, upto, limit)).fetchall()

    def page_before(self, before: int, limit: int, where: str = "1", params: tuple = (), *,
                    select: str | None = None) -> list[tuple]:
        """The last ``limit`` rows with id below ``before`` matching ``where``, in id order (a page
        back from ``before``: the rows a person saw just before the page starting there)."""
        sql = select or self.layout.select_sql()
        rows = self.conn.execute(f'{sql} WHERE {where} AND "_id" < ? ORDER BY "_id" DESC LIMIT ?',
                                 (*params, before, limit)).fetchall()
        rows.reverse()
        return rows

    def first_from(self, row_id: int) -> tuple[int, str] | None:
        """(id, ``_created_at``) of the first row at or above ``row_id`` (None above the last row):
        one step of a bisection on creation time, which grows with the id."""
        return self.conn.execute(f'SELECT "_id", "_created_at" FROM {self.layout.table} WHERE "_id" >= ? '
                                 'ORDER BY "_id" LIMIT 1', (row_id,)).fetchone()

    def scan(self, where: str = "1", params: tuple = (), *, after: int = 0, upto: int | None = None,
             page: int = PAGE, select: str | None = None) -> Iterator[list[tuple]]:
        """Pages of at most ``page`` rows (:meth:`page`) above ``after`` until none is left;
        a page is read after the previous one is used, so acks meanwhile are safe."""
        while True:
            rows = self.page(after, page, where, params, upto=upto, select=select)
            if not rows:
                return
            yield rows
            after = rows[-1][0]

    def nth_from_end(self, n: int, where: str = "1", params: tuple = ()) -> int | None:
        """The id of the ``n``-th last row matching ``where`` (None when fewer match)."""
        row = self.conn.execute(f'SELECT "_id" FROM {self.layout.table} WHERE {where} ORDER BY "_id" DESC '
                                "LIMIT 1 OFFSET ?", (*params, n - 1)).fetchone()
        return row[0] if row else None

    def aggregate(self, select: str, where: str, params: tuple = ()) -> tuple:
        """One row of ``SELECT {select} FROM`` the table ``WHERE {where}`` (a window emitter's
        question: ``select`` and ``where`` are the emitter's SQL over the topic's columns)."""
        return self.conn.execute(f"SELECT {select} FROM {self.layout.table} WHERE {where}", params).fetchone()

    # -- what a consumer has pending --------------------------------------------------
    def pending(self, consumer_id: int | None, *, before: str | None = None) -> tuple[int, int]:
        """(rows pending for the consumer, the highest of them or 0), optionally only rows
        stored before ``before`` (a ``_created_at`` text)."""
        cond, params = acks.pending_filter(consumer_id)
        if before is not None:
            cond, params = f'{cond} AND "_created_at" < ?', (*params, before)
        n, top = self.conn.execute(f'SELECT count(*), max("_id") FROM {self.layout.table} WHERE {cond}',
                                   params).fetchone()
        return n, top or 0

    def nth_pending(self, consumer_id: int, n: int, upto: int) -> tuple[int, int]:
        """(id of the ``n``-th row pending for the consumer at or below ``upto`` (else ``upto``),
        how many are pending there, at most ``n``)."""
        pending, params = acks.pending_filter(consumer_id)
        table = self.layout.table
        row = self.conn.execute(
            f'SELECT "_id" FROM {table} WHERE {pending} AND "_id" <= ? ORDER BY "_id" LIMIT 1 OFFSET ?',
            (*params, upto, n - 1)).fetchone()
        count = self.conn.execute(
            f'SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {pending} AND "_id" <= ? LIMIT ?)',
            (*params, upto, n)).fetchone()[0]
        return (row[0] if row else upto), count

    def read_bounds(self, *, which: str = "new", consumer_id: int | None = None, upto: int | None = None,
                    partitions: Iterable[int] | None = None, start: str | None = None) -> ReadBounds:
        """Fix the rows a read returns: ids up to ``upto`` (default: the high watermark) that
        are ``which`` ('new': pending for the consumer; 'handled'; 'all') in ``partitions``.
        ``start`` with no consumer: the rows pending for a consumer not registered yet that
        would start there (a dry run of a new stage).

        Raises:
            PartitionOutOfRangeError: a partition the topic does not have.
        """
        if which not in WHICH:
            raise InvalidSettingError(f"which must be one of {WHICH}, got {which!r}")
        layout, conn = self.layout, self.conn
        upto = int(self.high_watermark() if upto is None else upto)
        parts = None if partitions is None else tuple(sorted({layout.check_partition(p) for p in partitions}))
        if which == "new" and consumer_id is None and start is not None:
            cond = acks.pending_sql_for_new(conn, layout.name, start, parts)
        elif which == "new":
            cond = acks.pending_sql(conn, layout.name, consumer_id, parts)
        elif which == "handled":
            cond = acks.done_sql(conn, layout.name, consumer_id, parts)
        else:
            cond = "1" if parts is None else f'"_partition" IN ({", ".join(str(p) for p in parts)})'
        lowest, rows = conn.execute(
            f'SELECT min("_id"), count(*) FROM {layout.table} WHERE {cond} AND "_id" <= ?', (upto,)).fetchone()
        return ReadBounds(layout.name, upto, int(lowest or 0), int(rows), f'{cond} AND "_id" <= {upto}', parts,
                          consumer_pending=which == "new" and consumer_id is not None)

    def storage_rows(self, where: str, fetch: int) -> Iterator[list[tuple]]:
        """Batches of at most ``fetch`` rows matching ``where`` (a ``ReadBounds.where``), in id
        order, as a JDBC read returns them: pending metadata (``META_SELECT``), then the fields
        in storage form (a stage's inputs exported for the executors)."""
        fields = ", ".join(quote_identifier(n) for n in self.layout.field_names)
        cursor = self.conn.execute(f'SELECT {META_SELECT}, {fields} FROM {self.layout.table} WHERE {where} '
                                   'ORDER BY "_id"')
        try:
            while rows := cursor.fetchmany(fetch):
                yield rows
        finally:
            cursor.close()

    def field_rows(self, after: int, upto: int, fetch: int) -> Iterator[list[tuple]]:
        """Batches of at most ``fetch`` rows with ids in ``(after, upto]``, in id order: ``_id`` then
        the fields in storage form (what a lake table copies, ``ledger/lake``)."""
        fields = ", ".join(quote_identifier(n) for n in self.layout.field_names)
        cursor = self.conn.execute(f'SELECT "_id", {fields} FROM {self.layout.table} WHERE "_id" > ? AND "_id" <= ? '
                                   'ORDER BY "_id"', (after, upto))
        try:
            while rows := cursor.fetchmany(fetch):
                yield rows
        finally:
            cursor.close()

"""Keyed tables: a topic that keeps one current row per key and takes upserts (a compacted topic).

Why a keyed table is a topic, and how its "current" state is kept:

- **Every upsert appends a version row** to the topic's own table, with a new id. So the
  table's changelog is its rows in id order, exactly like a topic's new rows: consumers,
  acks, ``iter_new``, replay, lineage, Spark reads and the status views work unchanged, and a
  downstream stage sees new and changed keys as its new rows (Kafka's compacted topic,
  Delta's change data feed). A version holds the whole merged row, never a delta.
- **The current version of each key is kept in a map**, ``"<topic>__current"`` (``k``: the
  64-bit hash of the key fields' stored values, as dedup keys are hashed (keys.py); ``id``:
  the current version; primary key (k, id), WITHOUT ROWID). Reading the current rows is an
  indexed read (the map joined to the table by id), never a max-per-key scan; a key whose
  hash collides with another key's simply has two entries under the same ``k``, and every
  lookup compares the key fields themselves, so keys stay exact.
- **A superseded version is marked** in ``"<topic>__superseded"`` (its id, and the id of the
  version that replaced it), in the same transaction that appends its successor.
- **Compaction** (:func:`compact_in_current_transaction`) deletes superseded versions once
  every consumer registered on the table has acked them (or they were handled for everyone),
  and no stage run in progress may still read them as of its snapshot (``keep_from``);
  with no consumer registered, every superseded version goes. A consumer that has not read a
  version yet keeps it. The current version of a key is never deleted, and neither is the
  newest row (ids are offsets, never reused).
- Plain SQL reads the current rows through the view ``"<topic>:current"`` (the table's
  columns), as ``"<topic>:status"`` gives statuses. ``:`` is not allowed in topic names.

Merge semantics (:func:`merge_rows_in_current_transaction`): rows are applied in order; per
key, a column is replaced by the newest value unless the table declares a merge function
for it: ``sum`` (int, float), ``max`` / ``min`` (int, float, str, bool, date, datetime),
``first`` (keep the stored value; any type), ``last`` / ``replace`` (the default). NULLs are
skipped as SQL aggregates skip them (``sum`` of NULL and 5 is 5). Several rows of one key in
one merge make one version (the rows folded in order). An upsert that leaves a key's row
exactly as it is writes no version (a re-run that recomputes the same values changes nothing
downstream). The catalog (``_minikafka_tables``) records that a topic is a table, its key
and merge functions; reopening it with other ones raises ``SchemaMismatchError`` before
anything is written.

Measured at 10M keys (docs/benchmarks.md, "Keyed tables"): what costs most is that 100,000
changed keys touch most of the map's leaves, each written again at COMMIT, and SQLite's work
per key. Loading the rows in key-hash order (the map's order) and a bigger page cache for the
temporary work tables measured no better, and are not done.

Crash contract: the merge runs inside the caller's transaction (a stage's commit, next to
its acks and run record; ``KeyedTable.upsert_many``) and writes versions, map and marks
together: a crash before COMMIT leaves nothing of it, after COMMIT all of it. Fault points
``keyed:versions-inserted`` and ``keyed:current-updated`` sit inside the transaction.
Keyed tables have one partition.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import Any

from ...errors import InvalidNameError, InvalidRecordError, InvalidSettingError, SchemaMismatchError
from ...util.faults import checkpoint
from . import bulk, counts, keys, status
from .identifiers import quote_identifier
from .layout import TopicLayout, canonical_json

CURRENT_SUFFIX = "__current"
SUPERSEDED_SUFFIX = "__superseded"
CURRENT_VIEW_SUFFIX = ":current"
MERGES = ("replace", "first", "sum", "max", "min")
ALIASES = {"last": "replace"}
SUMMABLE = ("int", "float")
ORDERED = ("int", "float", "str", "bool", "date", "datetime")
WORK = "temp.mk_keyed"
FOLDED = "temp.mk_keyed_folded"
CHANGED = "temp.mk_keyed_changed"
MMAP_BYTES = 1 << 34  # at most what SQLite was built to map (2 GiB by default)


def current_map_name(topic: str) -> str:
    return topic + CURRENT_SUFFIX


def superseded_name(topic: str) -> str:
    return topic + SUPERSEDED_SUFFIX


def current_view_name(topic: str) -> str:
    return topic + CURRENT_VIEW_SUFFIX


@dataclass(frozen=True)
class TableSpec:
    """What makes a topic a keyed table: its key fields and the merge function of each column
    that does not simply take the newest value."""

    topic: str
    key: tuple[str, ...]
    merge: dict[str, str] = field(default_factory=dict)

    def merge_of(self, name: str) -> str:
        return self.merge.get(name, "replace")

    def key_json(self) -> str:
        return canonical_json(list(self.key))

    def merge_json(self) -> str:
        return canonical_json(dict(sorted(self.merge.items())))


@dataclass
class MergeCounts:
    """What a merge did: rows given, versions written (``inserted`` new keys + ``updated``
    changed keys), ``unchanged`` keys (the upsert left the row as it was), and the ids of
    the versions written (``first_id``..``last_id``, consecutive; None when none)."""

    rows: int = 0
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    first_id: int | None = None
    last_id: int | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # where the time went, by step

    @property
    def versions(self) -> int:
        return self.inserted + self.updated

    def add(self, other: MergeCounts) -> None:
        self.rows += other.rows
        self.inserted += other.inserted
        self.updated += other.updated
        self.unchanged += other.unchanged
        if other.first_id is not None:
            self.first_id = other.first_id if self.first_id is None else self.first_id
            self.last_id = other.last_id


def check_spec(layout: TopicLayout, key: Sequence[str] | str, merge: dict[str, str] | None) -> TableSpec:
    """The table spec of ``key`` and ``merge`` on ``layout``, checked.

    Raises:
        InvalidSettingError: no key, a key or merge field the model lacks, a merge function
            that is unknown or does not fit the column's type, a merge on a key field, or a
            partitioned topic.
    """
    name = layout.name
    if isinstance(key, str):
        key = (key,)
    key = tuple(key or ())
    if not key:
        raise InvalidSettingError(f"table {name!r}: key must name at least one field")
    fields = layout.field_names
    for k in key:
        if k not in fields:
            raise InvalidSettingError(f"table {name!r}: key field {k!r} is not a field of the model (fields: {fields!r})")
    if len(set(key)) != len(key):
        raise InvalidSettingError(f"table {name!r}: key fields repeat: {key!r}")
    if layout.partitions != 1:
        raise InvalidSettingError(f"table {name!r}: a keyed table has one partition, got partitions={layout.partitions}")
    if layout.dedup:
        raise InvalidSettingError(f"table {name!r}: a keyed table takes no dedup fields (its key decides)")
    if merge is not None and not isinstance(merge, dict):
        raise InvalidSettingError(f"table {name!r}: merge must be a dict {{field: function}}, got {merge!r}")
    out: dict[str, str] = {}
    for column, fn in (merge or {}).items():
        if column not in fields:
            raise InvalidSettingError(f"table {name!r}: merge field {column!r} is not a field of the model")
        if column in key:
            raise InvalidSettingError(f"table {name!r}: merge field {column!r} is a key field (a key does not merge)")
        fn = ALIASES.get(fn, fn)
        if fn not in MERGES:
            raise InvalidSettingError(f"table {name!r}: unknown merge function {fn!r} for field {column!r} "
                                      f"(use one of {', '.join(MERGES + tuple(ALIASES))})")
        kind = layout.column(column).kind
        if fn == "sum" and kind not in SUMMABLE:
            raise InvalidSettingError(f"table {name!r}: merge 'sum' needs an int or float field; {column!r} is {kind}")
        if fn in ("max", "min") and kind not in ORDERED:
            raise InvalidSettingError(f"table {name!r}: merge {fn!r} needs an int, float, str, bool, date or "
                                      f"datetime field; {column!r} is {kind}")
        if fn != "replace":
            out[column] = fn
    return TableSpec(name, key, out)


# -- the catalog --------------------------------------------------------------------------
def table_spec(conn: sqlite3.Connection, topic: str) -> TableSpec | None:
    """The stored spec of ``topic`` when it is a keyed table, else None."""
    row = conn.execute("SELECT topic, key, merge FROM _minikafka_tables WHERE topic = ?", (topic,)).fetchone()
    if row is None:
        return None
    return TableSpec(row[0], tuple(json.loads(row[1])), dict(json.loads(row[2])))


def table_names(conn: sqlite3.Connection) -> list[str]:
    """Names of the topics that are keyed tables, sorted."""
    return [r[0] for r in conn.execute("SELECT topic FROM _minikafka_tables ORDER BY topic")]


def check_reopen(conn: sqlite3.Connection, spec: TableSpec) -> None:
    """Raise unless the stored topic is a keyed table with ``spec``'s key and merge functions.

    Raises:
        SchemaMismatchError: a plain topic, another key, or other merge functions.
    """
    stored = table_spec(conn, spec.topic)
    if stored is None:
        raise SchemaMismatchError(f"topic {spec.topic!r} exists as a plain topic, not a keyed table; "
                                  "open it with source.topic(), or give the table another name")
    if stored.key != spec.key:
        raise SchemaMismatchError(f"table {spec.topic!r} exists with a different key: stored {stored.key!r}, "
                                  f"given {spec.key!r}")
    if stored.merge != spec.merge:
        raise SchemaMismatchError(f"table {spec.topic!r} exists with different merge functions: stored "
                                  f"{stored.merge!r}, given {spec.merge!r}")


def create_table_in_current_transaction(conn: sqlite3.Connection, layout: TopicLayout, spec: TableSpec,
                                        now: str) -> None:
    """Make the topic ``layout`` (just created, empty) a keyed table: its catalog row, its
    current map, its superseded marks and its ``:current`` view (the caller commits).

    Raises:
        InvalidNameError: a table of the map's or marks' name exists already.
    """
    topic = layout.name
    clash = conn.execute("SELECT name FROM sqlite_schema WHERE lower(name) IN (lower(?), lower(?))",
                         (current_map_name(topic), superseded_name(topic))).fetchone()
    if clash:
        raise InvalidNameError(f"table {topic!r} clashes with existing table {clash[0]!r}")
    conn.execute("INSERT INTO _minikafka_tables (topic, key, merge, created_at) VALUES (?, ?, ?, ?)",
                 (topic, spec.key_json(), spec.merge_json(), now))
    for statement in table_ddl(layout):
        conn.execute(statement)


def table_ddl(layout: TopicLayout) -> list[str]:
    """CREATE statements of a keyed table's map, marks and ``:current`` view."""
    topic = layout.name
    current, superseded = quote_identifier(current_map_name(topic)), quote_identifier(superseded_name(topic))
    return [
        f"CREATE TABLE {current} (k INTEGER NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (k, id)) STRICT, WITHOUT ROWID",
        f"CREATE TABLE {superseded} (id INTEGER PRIMARY KEY, by INTEGER NOT NULL) STRICT",
        f"CREATE VIEW {quote_identifier(current_view_name(topic))} AS SELECT t.* FROM {current} c "
        f"JOIN {layout.table} t ON t.\"_id\" = c.id",
    ]


# -- merging ------------------------------------------------------------------------------
def _key_layout(layout: TopicLayout, spec: TableSpec) -> TopicLayout:
    """``layout`` with the table key as its dedup fields: what keys.py hashes."""
    cache = layout.__dict__.setdefault("_keyed_cache", {})
    if spec.key not in cache:
        cache[spec.key] = replace(layout, dedup=spec.key)
    return cache[spec.key]


def _merged(fn: str, new: str, old: str) -> str:
    """SQL of the merged value of a column (``new``: the upsert's value, ``old``: the stored
    one, a column of the stored row ``o``)."""
    if fn == "sum":
        return f"coalesce({old} + {new}, {new}, {old})"
    if fn in ("max", "min"):
        return f"coalesce({fn}({old}, {new}), {new}, {old})"
    if fn == "first":  # the stored value, once there is a stored row
        return f'CASE WHEN o."_id" IS NULL THEN {new} ELSE {old} END'
    return new


def _folded(fn: str, q: str) -> str:
    """SQL of a column folded over the rows of one key in one merge (window ``w``)."""
    if fn == "sum":
        return f"sum({q}) OVER w"
    if fn in ("max", "min"):
        return f"{fn}({q}) OVER w"
    if fn == "first":
        return f"first_value({q}) OVER w"
    return q  # the last row's value: the row kept


def _create_work(conn: sqlite3.Connection, layout: TopicLayout, name: str) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    cols = ", ".join(f"{quote_identifier(c.name)} {c.sql_type}" for c in layout.columns)
    conn.execute(f'CREATE TABLE {name} ("_seq" INTEGER PRIMARY KEY, "_k" INTEGER, {cols}, "_parent_id" INTEGER, '
                 '"_parent_topic" TEXT)')


def _create_changed(conn: sqlite3.Connection, layout: TopicLayout) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {CHANGED}")
    cols = ", ".join(f"{quote_identifier(c.name)} {c.sql_type}" for c in layout.columns)
    conn.execute(f'CREATE TABLE {CHANGED} ("_n" INTEGER PRIMARY KEY, "_k" INTEGER, "_old" INTEGER, {cols}, '
                 '"_parent_id" INTEGER, "_parent_topic" TEXT)')


def merge_rows_in_current_transaction(conn: sqlite3.Connection, layout: TopicLayout, batches: Iterable[Any],
                                      now: str, run_id: str | None = None, *, spec: TableSpec | None = None,
                                      default_parent_topic: str | None = None) -> MergeCounts:
    """Merge Arrow record batches of storage values (the table's fields, optionally
    ``_parent_id`` and ``_parent_topic``) into the keyed table ``layout``, inside the caller's
    transaction; all batches are one merge (rows applied in order). What a stage's commit calls
    next to its acks.

    Raises:
        InvalidRecordError: a row cannot be stored (a missing field, a type or constraint the
            table refuses); nothing of the merge is stored once the caller rolls back.
        TopicNotFoundError: (via the caller) ``layout`` is not a keyed table.
    """
    spec = spec or _require_spec(conn, layout)
    key_layout = _key_layout(layout, spec)
    names = layout.field_names
    t0 = time.perf_counter()
    _create_work(conn, layout, WORK)
    insert = _work_insert(layout)
    seq = 0
    hashed = []  # the rows' hashes, when Python computed every one (duplicates found without SQL)
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        missing = [f for f in names if f not in batch.schema.names]
        if missing:
            raise InvalidRecordError(f"table {layout.name!r}: rows lack the field(s) {missing!r}")
        hashes = keys.arrow_hashes(key_layout, batch)
        if hashed is not None:
            hashed = None if hashes is None else [*hashed, hashes]
        schema_names = batch.schema.names
        if "_parent_id" in schema_names:
            parents = batch.column("_parent_id").to_pylist()
            if "_parent_topic" in schema_names:
                parent_topics = batch.column("_parent_topic").to_pylist()
            else:
                parent_topics = [default_parent_topic if p is not None else None for p in parents]
        else:
            parents, parent_topics = repeat(None, n), repeat(None, n)
        conn.executemany(insert, zip(range(seq + 1, seq + n + 1), repeat(None, n) if hashes is None else hashes.tolist(),
                                     *[batch.column(name).to_pylist() for name in names], parents, parent_topics))
        seq += n
    unique = None
    if hashed:
        import numpy as np

        every = np.concatenate(hashed)
        unique = len(np.unique(every)) == len(every)
    loaded = time.perf_counter() - t0
    result = _merge(conn, layout, spec, seq, now, run_id, unique=unique)
    result.seconds["load"] = round(loaded, 4)
    return result


def merge_values_in_current_transaction(conn: sqlite3.Connection, layout: TopicLayout, rows: list[tuple],
                                        now: str, *, lineage: Sequence[tuple] | None = None,
                                        run_id: str | None = None, spec: TableSpec | None = None) -> MergeCounts:
    """As :func:`merge_rows_in_current_transaction`, from rows of encoded field values (the
    Python API's path; ``lineage``: (parent id, parent topic) per row)."""
    spec = spec or _require_spec(conn, layout)
    _create_work(conn, layout, WORK)
    n = len(rows)
    hashes = keys.row_hashes(_key_layout(layout, spec), rows) or repeat(None, n)
    if lineage is None:
        params = [(i, h, *r, None, None) for i, h, r in zip(range(1, n + 1), hashes, rows)]
    else:
        params = [(i, h, *r, *line) for i, h, r, line in zip(range(1, n + 1), hashes, rows, lineage)]
    conn.executemany(_work_insert(layout), params)
    return _merge(conn, layout, spec, n, now, run_id)


def _work_insert(layout: TopicLayout) -> str:
    cols = ", ".join(quote_identifier(n) for n in ("_seq", "_k", *layout.field_names, "_parent_id", "_parent_topic"))
    return f"INSERT INTO {WORK} ({cols}) VALUES ({', '.join('?' for _ in range(len(layout.columns) + 4))})"


def _require_spec(conn: sqlite3.Connection, layout: TopicLayout) -> TableSpec:
    spec = table_spec(conn, layout.name)
    if spec is None:
        raise SchemaMismatchError(f"topic {layout.name!r} is not a keyed table: rows cannot be merged into it")
    return spec


def _merge(conn: sqlite3.Connection, layout: TopicLayout, spec: TableSpec, n: int, now: str,
           run_id: str | None, *, unique: bool | None = None) -> MergeCounts:
    """The merge of the loaded rows with a page cache that holds the table's map and the pages
    being written (bulk.py) and the file memory-mapped (the stored versions of the changed
    keys are read in place, at random), then the work tables dropped. ``unique``: whether
    the rows' hashes are known to be distinct (None: not known)."""
    top = conn.execute(f'SELECT coalesce(max("_id"), 0) FROM {layout.table}').fetchone()[0]
    mmap = conn.execute("PRAGMA mmap_size").fetchone()  # None: a database in memory
    if mmap is not None:
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
    try:
        with bulk.page_cache(conn, [], extra_bytes=top * bulk.ENTRY_BYTES + n * bulk.ROW_BYTES):
            result = _merge_work(conn, layout, spec, n, now, run_id, unique)
    finally:
        if mmap is not None:
            conn.execute(f"PRAGMA mmap_size = {int(mmap[0])}")
    for name in (WORK, FOLDED, CHANGED):
        conn.execute(f"DROP TABLE IF EXISTS {name}")
    return result


def _merge_work(conn: sqlite3.Connection, layout: TopicLayout, spec: TableSpec, n: int, now: str,
                run_id: str | None, unique: bool | None) -> MergeCounts:
    """Merge the rows loaded in the work table (see the module docstring for each step)."""
    result = MergeCounts(rows=n)
    if n == 0:
        return result
    table = layout.table
    fields = [quote_identifier(f) for f in layout.field_names]
    keyq = [quote_identifier(k) for k in spec.key]
    key_layout = _key_layout(layout, spec)
    work = WORK
    clock = _Steps(result.seconds)
    # hashes Python could not compute (a value not of its column's exact type): in SQL, as stored
    conn.execute(f'UPDATE {work} SET "_k" = {key_layout.key_sql(fields)} WHERE "_k" IS NULL')
    if unique is None:
        unique = n < 2 or not conn.execute(f'SELECT 1 FROM {work} GROUP BY "_k" HAVING count(*) > 1 LIMIT 1').fetchone()
    if not unique:
        work = _fold(conn, layout, spec, fields, keyq)
    # each row's current version (the map's entry of its hash whose key fields are the row's),
    # merged with the row; the rows that change their key's row, numbered in order (_n)
    same_key = " AND ".join(f"p.{q} IS w.{q}" for q in keyq)
    current, superseded = quote_identifier(current_map_name(layout.name)), quote_identifier(superseded_name(layout.name))
    merged = [_merged(spec.merge_of(name), f"w.{f}", f"o.{f}") for f, name in zip(fields, layout.field_names)]
    same = " AND ".join(f"({m}) IS o.{f}" for m, f in zip(merged, fields))
    clock("fold")
    _create_changed(conn, layout)
    conn.execute(
        f'INSERT INTO {CHANGED} ("_k", "_old", {", ".join(fields)}, "_parent_id", "_parent_topic") '
        f'SELECT w."_k", o."_id", {", ".join(merged)}, w."_parent_id", w."_parent_topic" FROM {work} w '
        f'LEFT JOIN {table} o ON o."_id" = (SELECT c.id FROM {current} c JOIN {table} p ON p."_id" = c.id '
        f'WHERE c.k = w."_k" AND {same_key}) WHERE o."_id" IS NULL OR NOT ({same}) ORDER BY w."_seq"')
    clock("lookup")
    versions, updated = conn.execute(f'SELECT count(*), count("_old") FROM {CHANGED}').fetchone()
    result.unchanged = n - versions
    result.inserted, result.updated = versions - updated, updated
    if not versions:
        return result
    top = conn.execute(f'SELECT coalesce(max("_id"), 0) FROM {table}').fetchone()[0]
    cols = ", ".join(['"_id"', *fields, '"_created_at"', '"_parent_id"', '"_parent_topic"', '"_run_id"'])
    try:
        conn.execute(f'INSERT INTO {table} ({cols}) SELECT ? + "_n", {", ".join(fields)}, ?, "_parent_id", '
                     f'"_parent_topic", ? FROM {CHANGED} ORDER BY "_n"', (top, now, run_id))
    except (sqlite3.IntegrityError, OverflowError) as exc:
        bad = conn.execute(f'SELECT {", ".join(fields)} FROM {CHANGED} ORDER BY "_n"').fetchall()
        raise layout.explain_write_error(exc, bad) from None
    clock("versions")
    checkpoint("keyed:versions-inserted")
    conn.execute(f'DELETE FROM {current} WHERE (k, id) IN (SELECT "_k", "_old" FROM {CHANGED} '
                 'WHERE "_old" IS NOT NULL)')
    conn.execute(f'INSERT INTO {current} (k, id) SELECT "_k", ? + "_n" FROM {CHANGED} ORDER BY "_k"', (top,))
    conn.execute(f'INSERT INTO {superseded} (id, by) SELECT "_old", ? + "_n" FROM {CHANGED} '
                 'WHERE "_old" IS NOT NULL ORDER BY "_old"', (top,))
    clock("current")
    checkpoint("keyed:current-updated")
    counts.note_appended_in_current_transaction(conn, layout.name, partitions=1, top=top + versions)
    result.first_id, result.last_id = top + 1, top + versions
    return result


class _Steps:
    """Adds the seconds since the last call to ``seconds[step]``."""

    def __init__(self, seconds: dict[str, float]):
        self.seconds, self.last = seconds, time.perf_counter()

    def __call__(self, step: str) -> None:
        now = time.perf_counter()
        self.seconds[step] = round(self.seconds.get(step, 0.0) + now - self.last, 4)
        self.last = now


def _fold(conn: sqlite3.Connection, layout: TopicLayout, spec: TableSpec, fields: list[str],
          keyq: list[str]) -> str:
    """Fold the rows of each key in the work table into one (in order; see ``_folded``),
    kept at the position of the key's last row; returns the table holding them."""
    _create_work(conn, layout, FOLDED)
    part = ", ".join(keyq)
    exprs = ", ".join(f"{_folded(spec.merge_of(name), f)} AS {f}" for f, name in zip(fields, layout.field_names))
    try:
        conn.execute(
            f'INSERT INTO {FOLDED} ("_seq", "_k", {", ".join(fields)}, "_parent_id", "_parent_topic") '
            f'SELECT "_seq", "_k", {", ".join(fields)}, "_parent_id", "_parent_topic" FROM ('
            f'SELECT "_seq", "_k", "_parent_id", "_parent_topic", {exprs}, row_number() OVER '
            f'(PARTITION BY {part} ORDER BY "_seq" DESC) AS "_rn" FROM {WORK} '
            f'WINDOW w AS (PARTITION BY {part} ORDER BY "_seq" ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED '
            f'FOLLOWING)) WHERE "_rn" = 1')
    except sqlite3.OperationalError as exc:  # integer overflow of a sum
        raise InvalidRecordError(f"table {layout.name!r}: cannot merge the rows of one key: {exc}") from None
    return FOLDED


# -- reading ------------------------------------------------------------------------------
def current_sql(layout: TopicLayout, spec: TableSpec) -> str:
    """``layout.select_sql()`` of the current version of one key (parameters: the key's
    stored values, in ``spec.key`` order)."""
    key_layout = _key_layout(layout, spec)
    by_field = ["NULL"] * len(layout.columns)
    for i, name in enumerate(spec.key):
        by_field[layout.field_names.index(name)] = f"?{i + 1}"
    same = " AND ".join(f"o.{quote_identifier(k)} IS ?{i + 1}" for i, k in enumerate(spec.key))
    current = quote_identifier(current_map_name(layout.name))
    return (f'{layout.select_sql()} WHERE "_id" = (SELECT c.id FROM {current} c JOIN {layout.table} o '
            f'ON o."_id" = c.id WHERE c.k = {key_layout.key_sql(by_field)} AND {same})')


def current_row(conn: sqlite3.Connection, layout: TopicLayout, spec: TableSpec, key: Sequence) -> tuple | None:
    """The ``select_sql`` row of the current version of ``key`` (stored values), or None."""
    return conn.execute(current_sql(layout, spec), tuple(key)).fetchone()


def current_page(conn: sqlite3.Connection, layout: TopicLayout, after: int, limit: int) -> list[tuple]:
    """Current versions with id above ``after``, in id order, at most ``limit`` (``select_sql`` rows)."""
    superseded = quote_identifier(superseded_name(layout.name))
    return conn.execute(f'{layout.select_sql()} WHERE "_id" > ? AND "_id" NOT IN (SELECT id FROM {superseded}) '
                        'ORDER BY "_id" LIMIT ?', (after, limit)).fetchall()


def count_current(conn: sqlite3.Connection, topic: str) -> int:
    """How many keys the table holds (entries of its map)."""
    return conn.execute(f"SELECT count(*) FROM {quote_identifier(current_map_name(topic))}").fetchone()[0]


def count_superseded(conn: sqlite3.Connection, topic: str) -> int:
    """How many superseded versions the table still stores (not compacted yet)."""
    return conn.execute(f"SELECT count(*) FROM {quote_identifier(superseded_name(topic))}").fetchone()[0]


# -- compaction ---------------------------------------------------------------------------
# every registered consumer is past the row (none registered: nobody needs it), or it was
# handled for everyone
_ALL_PAST_OR_NONE = (f"({status.EXPLICIT} OR NOT EXISTS (SELECT 1 FROM _minikafka_consumers k WHERE k.topic = {{T}} "
                     f"AND NOT {status.PAST.replace('{C}', 'k.id')}))")


def compact_in_current_transaction(conn: sqlite3.Connection, layout: TopicLayout, *,
                                   keep_from: str | None = None) -> int:
    """Delete the superseded versions every consumer of the table has acked (see the module
    docstring); returns how many. ``keep_from`` (a ``_created_at`` timestamp): keep every
    version whose successor was written at or after it (what a stage run in progress may still
    read as of its snapshot: ``consuming/table_compaction.py``). The append-only trigger is
    lifted for this one statement inside the transaction, as retention does; the table's row
    marks from the first deleted row up are counted again (counts.py)."""
    table = layout.table
    superseded = quote_identifier(superseded_name(layout.name))
    done = status.render(_ALL_PAST_OR_NONE, layout.name, partition="0")
    marks, params = f"SELECT id FROM {superseded}", ()
    if keep_from is not None:
        marks = (f'SELECT s.id FROM {superseded} s JOIN {table} b ON b."_id" = s."by" '
                 'WHERE b."_created_at" < ?')
        params = (keep_from,)
    conn.execute("DROP TABLE IF EXISTS temp.mk_compact")
    conn.execute(f'CREATE TABLE temp.mk_compact AS SELECT "_id" AS id FROM {table} '
                 f'WHERE "_id" IN ({marks}) AND {done}', params)
    first = conn.execute("SELECT min(id) FROM temp.mk_compact").fetchone()[0]
    if first is None:
        return 0
    trigger = quote_identifier(layout.name + "__append_only")
    conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    deleted = conn.execute(f'DELETE FROM {table} WHERE "_id" IN (SELECT id FROM temp.mk_compact)').rowcount
    conn.execute(layout.append_only_ddl(layout.name))
    conn.execute(f"DELETE FROM {superseded} WHERE id IN (SELECT id FROM temp.mk_compact)")
    counts.forget_from_in_current_transaction(conn, layout.name, first)
    counts.note_appended_in_current_transaction(conn, layout.name, partitions=1)
    return deleted

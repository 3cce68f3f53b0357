"""A topic's table layout: its columns, dedup fields, DDL, and row encoding/decoding."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from pydantic import BaseModel

from ...errors import (
    ArgumentTypeError,
    DedupFieldError,
    DuplicateMessageError,
    InvalidRecordError,
    InvalidSettingError,
    PartitionOutOfRangeError,
)
from . import status
from .columns import META_COLUMNS, ColumnSpec, check_int_range, column_from_description, columns_for_model
from .identifiers import quote_identifier, validate_topic_name
from .keys import FUNCTION as KEY_FUNCTION
from .keys import KEY

N_META = len(META_COLUMNS)
# Rows keep their shape (META_COLUMNS, the fields, then "_partition") although a topic table
# stores no status: ``_status`` and ``_handled_at`` are computed from positions and acks
# (status.py). The table's own metadata columns:
STORED_META = ("_id", "_created_at", "_parent_id", "_parent_topic", "_run_id")
STORED_META_SELECT = ", ".join(quote_identifier(c) for c in STORED_META)
_STORED_AT = tuple(META_COLUMNS.index(c) for c in STORED_META)
# The metadata of rows read as pending for a consumer: their status is 'new' by definition
# and they have no handled time (no per-row lookup). Every other read uses
# ``TopicLayout.meta_select()``, which computes both.
META_SELECT = ", ".join(
    "'new' AS \"_status\"" if c == "_status" else "NULL AS \"_handled_at\"" if c == "_handled_at"
    else quote_identifier(c) for c in META_COLUMNS)
# The partition column is not in META_COLUMNS (rows keep their shape): select_sql()
# returns it after the fields, inserts into a partitioned topic end with it.
PARTITION = "_partition"
MAX_PARTITIONS = 4096


def _strip_docs(node: Any) -> Any:
    """Drop titles and descriptions: renaming a class or editing a docstring is compatible."""
    if isinstance(node, dict):
        return {
            k: _strip_docs(v)
            for k, v in node.items()
            if not (k in ("title", "description") and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_strip_docs(v) for v in node]
    return node


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass
class TopicLayout:
    """Everything the ledger knows about how one topic is stored."""

    name: str
    columns: list[ColumnSpec]
    dedup: tuple[str, ...]
    json_schema: dict = field(default_factory=dict)
    model: type[BaseModel] | None = None
    partitions: int = 1
    key: tuple[str, ...] = ()

    @classmethod
    def for_model(cls, name: str, model: type[BaseModel], dedup, *, partitions: int = 1,
                  key=None) -> TopicLayout:
        """Build and check the layout of ``model`` under topic ``name``.

        Raises:
            InvalidNameError, UnsupportedTypeError: bad topic/field names or types.
            SchemaMismatchError: a dedup or key field the model lacks.
            ValueError: a partition count that is not an integer in 1..4096.
        """
        validate_topic_name(name)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ArgumentTypeError(f"model for topic {name!r} must be a pydantic BaseModel class, got {model!r}")
        columns = columns_for_model(model)
        dedup_fields = normalise_dedup(name, model, dedup)
        key_fields = normalise_dedup(name, model, key, what="key")
        return cls(name, columns, dedup_fields, model.model_json_schema(), model,
                   check_partitions(name, partitions), key_fields)

    @classmethod
    def from_catalog(cls, row: sqlite3.Row | tuple, *, partitions: int = 1, key=()) -> TopicLayout:
        name, schema, columns, dedup = row
        cols = [column_from_description(d) for d in json.loads(columns)]
        return cls(name, cols, tuple(json.loads(dedup)), json.loads(schema), None, int(partitions), tuple(key))

    # -- identity ---------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        body = {
            "columns": [c.describe() for c in self.columns],
            "schema": _strip_docs(self.json_schema),
        }
        return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()

    def describe_columns(self) -> str:
        return canonical_json([c.describe() for c in self.columns])

    def mismatch(self, stored: TopicLayout, stored_fingerprint: str) -> str | None:
        """Explain why this layout cannot reopen ``stored`` (None when compatible)."""
        if sorted(stored.dedup) != sorted(self.dedup):
            return f"dedup fields differ: stored {stored.dedup!r}, given {self.dedup!r}"
        if stored.partitions != self.partitions:
            return f"partition count differs: stored {stored.partitions}, given {self.partitions}"
        if stored.key != self.key:
            return f"key fields differ: stored {stored.key!r}, given {self.key!r}"
        if stored_fingerprint == self.fingerprint:
            return None
        old = {c.name: c.describe() for c in stored.columns}
        new = {c.name: c.describe() for c in self.columns}
        diffs = [f"field {n!r} removed" for n in old if n not in new]
        diffs += [f"field {n!r} added" for n in new if n not in old]
        for n in old.keys() & new.keys():
            if old[n] != new[n]:
                changed = sorted(k for k in old[n] if old[n][k] != new[n].get(k))
                diffs.append(f"field {n!r} changed ({', '.join(changed)})")
        return "; ".join(sorted(diffs)) or "model JSON schema differs (constraints or defaults)"

    # -- SQL --------------------------------------------------------------------
    @property
    def table(self) -> str:
        return quote_identifier(self.name)

    @property
    def field_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> ColumnSpec:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def ddl(self, table_name: str | None = None) -> list[str]:
        """CREATE TABLE, its indexes, trigger and status views (optionally under another table
        name: the views are always the topic's, over that table)."""
        base = table_name or self.name
        t = quote_identifier(base)
        cols = [
            '"_id" INTEGER PRIMARY KEY',
            '"_created_at" TEXT NOT NULL',
            '"_parent_id" INTEGER',
            '"_parent_topic" TEXT',
            '"_run_id" TEXT',
        ] + [c.ddl() for c in self.columns] + [PARTITION_COLUMN_DDL] + ([KEY_COLUMN_DDL] if self.dedup else [])
        statements = [f"CREATE TABLE {t} (\n  " + ",\n  ".join(cols) + "\n) STRICT"]
        if self.partitions > 1:  # a one-partition topic reads by id alone: an index would only cost inserts
            statements.append(partition_index_ddl(base))
        statements.append(self.append_only_ddl(base))
        if self.dedup:
            statements.extend(self.dedup_index_ddl(base))
        statements.extend(status.view_ddl(self.name, base))
        return statements

    def drop_views_ddl(self) -> list[str]:
        """DROP VIEW of the topic's status views: run before its table is dropped or replaced."""
        return status.drop_view_ddl(self.name)

    def append_only_ddl(self, base: str) -> str:
        # Ids are offsets and must never be reused. SQLite only reuses a rowid after the
        # row holding the maximum is deleted, so refusing deletes keeps ids monotonic
        # without AUTOINCREMENT's per-row sqlite_sequence update.
        return (
            f"CREATE TRIGGER {quote_identifier(base + '__append_only')} BEFORE DELETE ON {quote_identifier(base)} "
            f"BEGIN SELECT RAISE(ABORT, 'topic {base} is append-only: rows cannot be deleted'); END"
        )

    def dedup_index_ddl(self, base: str) -> list[str]:
        """The unique index on the dedup hash ``"_key"`` and the partial unique index on the
        dedup fields of rows whose hash collided (``"_key"`` NULL; see keys.py)."""
        return [f"CREATE UNIQUE INDEX {quote_identifier(base + '__key')} ON {quote_identifier(base)} (\"{KEY}\")",
                self.dedup_fields_index_ddl(base, where=f'"{KEY}" IS NULL')]

    def dedup_fields_index_ddl(self, base: str, *, where: str | None = None) -> str:
        # NULL is a value for dedup (as in minikafka's hash): map it to a blob no field holds
        parts = []
        for name in self.dedup:
            q = quote_identifier(name)
            parts.append(f"ifnull({q}, x'00')" if self.column(name).nullable else q)
        return (
            f"CREATE UNIQUE INDEX {quote_identifier(base + '__dedup')} ON {quote_identifier(base)} "
            f"({', '.join(parts)})" + (f" WHERE {where}" if where else "")
        )

    def key_sql(self, values: list[str]) -> str:
        """The dedup hash of the rows' dedup values as SQL: ``values`` are SQL expressions of
        every field's value in field order (parameters, a row file's columns), each cast to
        its column's type so the hash is that of the value the table stores."""
        args = []
        for name in self.dedup:
            i = self.field_names.index(name)
            sql_type = self.columns[i].sql_type
            args.append(values[i] if sql_type == "BLOB" else f"CAST({values[i]} AS {sql_type})")
        return f"{KEY_FUNCTION}({', '.join(args)})"

    def upsert_sql(self) -> str:
        """The conflict clause of inserts that skip duplicates: a row whose hash is taken by
        other dedup values "updates" that row to itself, which tells a collision apart
        (keys.py); one whose hash is taken by its own values is skipped."""
        differs = " OR ".join(f"excluded.{quote_identifier(n)} IS NOT {quote_identifier(n)}" for n in self.dedup)
        return (f' ON CONFLICT ("{KEY}") DO UPDATE SET "{KEY}" = excluded."{KEY}" WHERE {differs} '
                "ON CONFLICT DO NOTHING")

    def insert_sql(self, *, lineage: bool = False, ignore_duplicates: bool = False, unhashed: bool = False,
                   keyed: bool = False) -> str:
        key = (lineage, ignore_duplicates, unhashed, keyed)
        cache = self.__dict__.setdefault("_insert_cache", {})
        if key not in cache:
            cache[key] = self._build_insert_sql(lineage, ignore_duplicates, unhashed, keyed)
        return cache[key]

    def _build_insert_sql(self, lineage: bool, ignore_duplicates: bool, unhashed: bool, keyed: bool) -> str:
        """Parameters: the fields, ``_created_at``, [lineage: ``_parent_id``, ``_parent_topic``,
        ``_run_id``], [``keyed``: the dedup hash, computed by the caller (keys.arrow_hashes)],
        [``_partition`` when partitioned]; built by ``table.TopicTable`` alone.
        A row's state is not a column (positions and acks): rows appended as handled are
        inserted, then marked (``acks.mark_appended_handled_in_current_transaction``)."""
        names = [*self.field_names, "_created_at"]
        if lineage:
            names += ["_parent_id", "_parent_topic", "_run_id"]
        key_at = len(names) + 1  # the hash's parameter number when the caller computed it
        if self.partitions > 1:
            names.append(PARTITION)  # see with_partitions()
        values = [f"?{i}" for i in range(1, len(names) + 1)]
        if keyed and self.dedup and self.partitions > 1:
            values[-1] = f"?{key_at + 1}"  # the partition follows the hash
        tail = " ON CONFLICT DO NOTHING" if ignore_duplicates else ""
        if self.dedup:  # the dedup hash, computed from the field parameters (keys.py)
            names.append(KEY)
            values.append("NULL" if unhashed else f"?{key_at}" if keyed else self.key_sql(values[:len(self.columns)]))
            if ignore_duplicates and not unhashed:
                tail = self.upsert_sql()
        cols = ", ".join(quote_identifier(name) for name in names)
        return f"INSERT INTO {self.table} ({cols}) VALUES ({', '.join(values)}){tail}"

    def select_sql(self, extra: Sequence[str] = ()) -> str:
        """SELECT of the metadata columns, the fields, then ``_partition`` (index ``partition_index``),
        then the ``extra`` columns (expressions the ledger composed, e.g. ``acks.status_column``).

        ``_status`` is the topic-wide status and ``_handled_at`` when the row became handled,
        both computed from positions and acks (``meta_select``).
        """
        cache = self.__dict__.setdefault("_select_cache", {})
        if "select" not in cache:
            fields = ", ".join(quote_identifier(n) for n in self.field_names)
            cache["columns"] = f"{self.meta_select()}, {fields}, \"{PARTITION}\""
            cache["select"] = f"SELECT {cache['columns']} FROM {self.table}"
        if not extra:
            return cache["select"]
        return f"SELECT {cache['columns']}, {', '.join(extra)} FROM {self.table}"

    @property
    def partition_sql(self) -> str:
        """The row's partition in the status expressions: a constant for a topic with one partition."""
        return "0" if self.partitions == 1 else f'"{PARTITION}"'

    def status_sql(self) -> str:
        """The topic-wide status of a row of this topic ('new'/'handled'), as an SQL expression."""
        return status.render(status.STATUS, self.name, partition=self.partition_sql)

    def handled_at_sql(self) -> str:
        """When a row of this topic became handled (NULL while it is new), as an SQL expression."""
        return status.render(status.HANDLED_AT, self.name, partition=self.partition_sql)

    def meta_select(self) -> str:
        """The metadata columns (META_COLUMNS) with the true status and handled time."""
        return ", ".join(
            f'{self.status_sql()} AS "_status"' if c == "_status" else
            f'{self.handled_at_sql()} AS "_handled_at"' if c == "_handled_at" else quote_identifier(c)
            for c in META_COLUMNS)

    @property
    def partition_index(self) -> int:
        """Where ``_partition`` sits in a row read with ``select_sql()``."""
        return N_META + len(self.columns)

    # -- partitions ---------------------------------------------------------------
    def route(self, values: tuple, seq: int) -> int:
        """The partition of a row from its encoded field ``values``.

        With key fields: a stable hash of the key (``key_partition``). Without: ``seq``
        modulo the partition count (callers pass the row's expected id, so rows spread
        evenly).
        """
        if self.partitions == 1:
            return 0
        if self.key:
            idx = self.__dict__.get("_key_idx")
            if idx is None:
                idx = self.__dict__["_key_idx"] = [self.field_names.index(k) for k in self.key]
            return key_partition([values[i] for i in idx], self.partitions)
        return seq % self.partitions

    def with_partitions(self, rows: list[tuple], first_seq: int) -> list[tuple]:
        """Append each row's partition to insert parameters (rows start with the field values).

        A topic with one partition needs no such column: rows come back unchanged.
        """
        if self.partitions == 1:
            return rows
        route = self.route
        return [row + (route(row, first_seq + i),) for i, row in enumerate(rows)]

    def unkeyed(self, rows: list[tuple], *, lineage: bool) -> list[tuple]:
        """Insert parameters for ``insert_sql(keyed=True)`` without their dedup hash: the
        parameters of the other inserts."""
        at = len(self.columns) + (4 if lineage else 1)
        return [row[:at] + row[at + 1:] for row in rows]

    def check_partition(self, partition: object) -> int:
        """``partition`` if it is a partition of this topic.

        Raises:
            PartitionOutOfRangeError: not an integer in ``0..partitions-1``.
        """
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < self.partitions:
            raise PartitionOutOfRangeError(
                f"topic {self.name!r} has partitions 0..{self.partitions - 1}; got partition {partition!r}"
            )
        return partition

    # -- values -----------------------------------------------------------------
    def check_int_range(self, values: tuple) -> None:
        """Refuse encoded ``values`` holding an int SQLite cannot store (beyond 64 bits).

        Raises:
            InvalidRecordError: names the field (a bad row for ingest and backfill).
        """
        ints = self.__dict__.get("_int_positions")
        if ints is None:
            ints = self.__dict__["_int_positions"] = [
                (j, c.name) for j, c in enumerate(self.columns) if c.sql_type == "INTEGER"]
        for j, name in ints:
            if values[j] is not None:
                check_int_range(values[j], name)

    def extra_names(self) -> list[str]:
        """Columns that are no field of the model: fields an ``extra="allow"`` model kept
        (``unknown_fields = "evolve"``), always the last columns; read from and written to
        the model's extras."""
        if self.model is None:
            return []
        fields = self.model.model_fields
        return [c.name for c in self.columns if c.name not in fields]

    def add_columns(self, columns: list[ColumnSpec]) -> None:
        """Append columns (an evolution) and forget the SQL built for the old ones."""
        self.columns.extend(columns)
        for cached in ("_insert_cache", "_select_cache", "_int_positions", "_key_idx"):
            self.__dict__.pop(cached, None)

    def encoder(self):
        """A function model -> list of column values, in field order (a model's kept extra
        fields last: ``extra_names``)."""
        names = self.field_names
        extras = self.extra_names()
        fields = names[:len(names) - len(extras)]
        getter = attrgetter(*fields)
        single = len(fields) == 1
        steps = [(i, c.name, c.encode) for i, c in enumerate(self.columns) if c.encode]
        topic = self.name

        def encode(instance) -> tuple:
            values = getter(instance)
            if single:
                values = (values,)
            if extras:
                bag = instance.__pydantic_extra__ or {}
                values = (*values, *(bag.get(n) for n in extras))
            if not steps:
                return values
            values = list(values)
            for i, name, fn in steps:
                v = values[i]
                if v is not None:
                    try:
                        values[i] = fn(v)
                    except InvalidRecordError as exc:
                        raise InvalidRecordError(f"topic {topic!r}, field {name!r}: {exc}") from None
            return tuple(values)

        return encode

    def decoder(self):
        """A function SQL row (meta columns first) -> dict of field values."""
        names = self.field_names
        steps = [(i, c.decode) for i, c in enumerate(self.columns) if c.decode]

        def decode(row) -> dict:
            values = list(row[N_META:])
            for i, fn in steps:
                v = values[i]
                if v is not None:
                    values[i] = fn(v)
            return dict(zip(names, values))

        return decode

    def explain_write_error(
        self, exc: Exception, rows: list, *, conn: sqlite3.Connection | None = None,
        existing_upto: int | None = None, row_offset: int = 0,
    ) -> Exception:
        """Turn an SQLite error on insert into a clear minikafka error naming row and field.

        ``conn`` is used to find which row's dedup key already existed in the topic,
        among ids up to ``existing_upto`` (rows stored before this write).
        """
        if isinstance(exc, OverflowError):
            for r, values in enumerate(rows):
                for col, v in zip(self.columns, values):
                    if isinstance(v, int) and not isinstance(v, bool):
                        try:
                            check_int_range(v, col.name)
                        except InvalidRecordError as bad:
                            return InvalidRecordError(f"topic {self.name!r}, row {r + row_offset}: {bad}")
            return InvalidRecordError(f"topic {self.name!r}: {exc}")
        code = getattr(exc, "sqlite_errorname", "")
        if code in ("SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY") and self.dedup:
            where = self._find_duplicate(rows, conn, existing_upto)
            if where is not None:
                r, key, inside = where
                origin = "earlier in the same batch" if inside else "already in the topic"
                return DuplicateMessageError(
                    f"duplicate message for topic {self.name!r} (row {r + row_offset}): dedup key "
                    f"{key!r} is {origin}",
                    topic=self.name, key=key, row=r + row_offset,
                )
            return DuplicateMessageError(
                f"duplicate message for topic {self.name!r} on dedup fields {self.dedup!r}",
                topic=self.name,
            )
        if code == "SQLITE_CONSTRAINT_NOTNULL":
            for r, values in enumerate(rows):
                for col, v in zip(self.columns, values):
                    if v is None and not col.nullable:
                        return InvalidRecordError(
                            f"topic {self.name!r}, row {r + row_offset}: field {col.name!r} is None "
                            "but the field is not Optional"
                        )
        return InvalidRecordError(f"topic {self.name!r}: cannot store row: {exc}")

    def _find_duplicate(self, rows: list, conn: sqlite3.Connection | None, upto: int | None):
        idx = [self.field_names.index(n) for n in self.dedup]
        seen = set()
        for r, values in enumerate(rows):
            key = tuple(values[i] for i in idx)
            if key in seen:
                return r, dict(zip(self.dedup, key)), True
            seen.add(key)
        if conn is not None:
            for r, values in enumerate(rows):
                key = tuple(values[i] for i in idx)
                if self.stored_key(conn, key, upto) is not None:
                    return r, dict(zip(self.dedup, key)), False
        return None

    def stored_key(self, conn: sqlite3.Connection, key: tuple, upto: int | None = None) -> int | None:
        """The id of the row holding dedup values ``key`` (in ``dedup`` order), at or below
        ``upto``; None when no row holds them. Two index lookups: by hash, then among the
        rows whose hash collided."""
        limit = (2**63 - 1) if upto is None else upto
        for sql in self.key_lookup_sql():
            row = conn.execute(sql, (*key, limit)).fetchone()
            if row is not None:
                return row[0]
        return None

    def key_lookup_sql(self) -> tuple[str, str]:
        """Parameters: the dedup values (``dedup`` order), then the highest id to look at."""
        cache = self.__dict__.setdefault("_select_cache", {})
        if "key_lookup" not in cache:
            n = len(self.dedup)
            conds = " AND ".join(f"{quote_identifier(name)} IS ?{i + 1}" for i, name in enumerate(self.dedup))
            by_field = ["NULL"] * len(self.columns)
            for i, name in enumerate(self.dedup):
                by_field[self.field_names.index(name)] = f"?{i + 1}"
            cache["key_lookup"] = (
                f'SELECT "_id" FROM {self.table} WHERE "{KEY}" = {self.key_sql(by_field)} AND {conds} '
                f'AND "_id" <= ?{n + 1}',
                f'SELECT "_id" FROM {self.table} WHERE "{KEY}" IS NULL AND {conds} AND "_id" <= ?{n + 1} LIMIT 1')
        return cache["key_lookup"]


PARTITION_COLUMN_DDL = f'"{PARTITION}" INTEGER NOT NULL DEFAULT 0'
KEY_COLUMN_DDL = f'"{KEY}" INTEGER'  # the dedup hash (keys.py); NULL for a row whose hash collided


def stored_meta(row: tuple) -> tuple:
    """The stored metadata (STORED_META) of a row read with ``select_sql``."""
    return tuple(row[i] for i in _STORED_AT)


def partition_index_ddl(base: str) -> str:
    # (_partition, rowid): a partition's rows in offset order, for fetch, lag and Spark reads
    return f"CREATE INDEX IF NOT EXISTS {quote_identifier(base + '__partition')} ON {quote_identifier(base)} (\"{PARTITION}\")"


def key_partition(values: list, partitions: int) -> int:
    """The partition of a key: blake2b (8 bytes, big-endian) of its canonical JSON, modulo ``partitions``.

    ``values`` are the key fields' stored values (ints, floats, text, bytes). The result
    depends on nothing but the values and the count: the same in every process,
    machine and version.
    """
    blob = json.dumps(values, separators=(",", ":"), ensure_ascii=False,
                      default=lambda v: {"bytes": v.hex()} if isinstance(v, (bytes, bytearray)) else str(v))
    digest = hashlib.blake2b(blob.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


def check_partitions(topic: str, partitions: object) -> int:
    if isinstance(partitions, bool) or not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS:
        raise InvalidSettingError(f"topic {topic!r}: partitions must be an integer from 1 to {MAX_PARTITIONS}, got {partitions!r}")
    return partitions


def normalise_dedup(topic: str, model: type[BaseModel], dedup, *, what: str = "dedup") -> tuple[str, ...]:
    """Check dedup (or key) fields exist on the model; return them as a tuple (in given order).

    Raises:
        DedupFieldError: (a ValueError) a dedup field is not a model field, or repeats.
    """
    if dedup is None:
        return ()
    if isinstance(dedup, str):
        dedup = (dedup,)
    fields = tuple(dedup)
    if not fields:
        return ()
    if len(set(fields)) != len(fields):
        repeated = sorted({f for f in fields if fields.count(f) > 1})
        raise DedupFieldError(f"topic {topic!r}: {what} fields must be unique; repeated: {repeated!r}")
    missing = [f for f in fields if f not in model.model_fields]
    if missing:
        raise DedupFieldError(
            f"topic {topic!r}: {what} fields are not present on model: {missing!r} "
            f"({model.__name__} has {list(model.model_fields)!r})"
        )
    return fields

"""Topic: a typed, append-only, schema-enforced ledger table."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter

from ..errors import (
    InvalidRecordError,
    MinikafkaError,
    SchemaMismatchError,
    UnknownStatusError,
    migration_failure,
)
from ..ledger import acks
from ..ledger.events import Event
from ..ledger.identifiers import quote_identifier
from ..ledger.layout import PARTITION, STORED_META, STORED_META_SELECT, TopicLayout, canonical_json, stored_meta
from ..util.clock import parse_timestamp, utc_now
from ..util.gcpause import gc_paused
from . import engines
from .record import Record
from .transaction import Transaction, joined

if TYPE_CHECKING:
    from .pipes import Pipeline
    from .queues import Queue
    from .source import Source

ModelT = TypeVar("ModelT", bound=BaseModel)
NewModelT = TypeVar("NewModelT", bound=BaseModel)

STATUSES = ("new", "handled")
PAGE = 1000


class RecordNotFoundError(MinikafkaError, KeyError):
    """No row with that id in the topic."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def check_status(status: str | None, *, allow_none: bool = True) -> str | None:
    if status is None and allow_none:
        return None
    if status not in STATUSES:
        raise UnknownStatusError(f"unknown status {status!r}: use 'new' or 'handled'")
    return status


def check_on_duplicate(value: str) -> bool:
    if value not in ("raise", "ignore"):
        raise ValueError(f"on_duplicate must be 'raise' or 'ignore', got {value!r}")
    return value == "ignore"


class Topic(Generic[ModelT]):
    """A named, typed, append-only log stored as one STRICT table.

    Get one from ``Source.topic(name, Model, dedup=...)``.
    """

    def __init__(self, source: Source, layout: TopicLayout, fingerprint: str):
        self.source = source
        self._layout = layout
        self._fingerprint = fingerprint
        self._encode = layout.encoder()
        self._decode = layout.decoder()
        self._adapter = TypeAdapter(list[layout.model])  # type: ignore[name-defined]

    # -- identity ---------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._layout.name

    @property
    def model(self) -> type[ModelT]:
        return self._layout.model  # type: ignore[return-value]

    @property
    def dedup(self) -> tuple[str, ...]:
        return self._layout.dedup

    @property
    def layout(self) -> TopicLayout:
        return self._layout

    @property
    def partitions(self) -> int:
        return self._layout.partitions

    @property
    def key(self) -> tuple[str, ...]:
        return self._layout.key

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, {self.model.__name__})"

    @property
    def _conn(self) -> sqlite3.Connection:
        conn = self.source._ledger.conn
        if self.source._fingerprints.get(self.name) != self._fingerprint:
            raise SchemaMismatchError(
                f"topic {self.name!r} was migrated; use the Topic returned by migrate()"
            )
        return conn

    def _validate(self, payload: ModelT | dict[str, Any]) -> ModelT:
        if isinstance(payload, self.model):
            return payload
        if isinstance(payload, BaseModel):
            payload = payload.model_dump()
        return self.model.model_validate(payload)

    # -- writing ----------------------------------------------------------------
    def append(self, payload: ModelT | dict[str, Any], partition: int | None = None, *,
               on_duplicate: str = "raise", tx: Transaction | None = None) -> ModelT | None:
        """Validate and append one message.

        Args:
            payload: a model instance or a dict.
            partition: the partition to append to; by default the topic's key fields pick
                it (a stable hash), or, without key fields, rows are spread evenly.
            on_duplicate: "raise" (minikafka's behaviour) or "ignore" (return None).
            tx: join the caller's transaction (``source.transaction()``).

        Returns:
            The validated model (None if ignored as a duplicate).

        Raises:
            pydantic.ValidationError: the payload does not fit the model.
            DuplicateMessageError: the dedup key is already in the topic.
            InvalidRecordError: a value the ledger cannot store exactly (NaN in a float field, NaN or
                infinity inside a JSON field, a Decimal beyond its decimal(P, S), > 64-bit int);
                the message names the field path and the value. Nothing is written.
            PartitionOutOfRangeError: ``partition`` is not one of the topic's partitions.

        Emits:
            message_appended, after the commit.
        """
        ignore = check_on_duplicate(on_duplicate)
        if partition is not None:
            self._layout.check_partition(partition)
        model = self._validate(payload)
        with joined(self.source, tx):
            row_id = self._insert_one_in_current_transaction(model, ignore_duplicates=ignore, partition=partition)
        return None if row_id is None else model

    def extend(
        self, rows: Iterable[ModelT | dict[str, Any]], *, on_duplicate: str = "raise", status: str = "new",
        tx: Transaction | None = None,
    ) -> int:
        """Validate and append many messages in one transaction: all or nothing.

        Args:
            rows: model instances and/or dicts.
            on_duplicate: "raise" (nothing is written) or "ignore" (skip duplicates).
            status: "new", or "handled" for history downstream consumers should skip.

        Returns:
            The number of rows written.

        Raises:
            pydantic.ValidationError: a row does not fit the model (its index is in the loc).
            DuplicateMessageError: a dedup key repeats in ``rows`` or is already stored.
            InvalidRecordError: a value the ledger cannot store exactly (names the row, field
                path and value); nothing is written.

        Emits:
            message_appended per row, after the commit (only when an observer is set).
        """
        ignore = check_on_duplicate(on_duplicate)
        check_status(status, allow_none=False)
        with gc_paused():
            rows = rows if isinstance(rows, list) else list(rows)
            models = self._adapter.validate_python(rows)
            with joined(self.source, tx):
                return self._insert_many_in_current_transaction(models, status=status, ignore_duplicates=ignore)

    def _insert_one_in_current_transaction(
        self, model: ModelT, *, parent_id: int | None = None, parent_topic: str | None = None,
        run_id: str | None = None, ignore_duplicates: bool = False, now: str | None = None,
        partition: int | None = None,
    ) -> int | None:
        """Insert one validated model; returns its id (None when ignored as duplicate)."""
        conn = self._conn
        values = self._encode(model)
        lineage = parent_id is not None or run_id is not None
        params = (*values, now or utc_now(), "new") + ((parent_id, parent_topic, run_id) if lineage else ())
        if self._layout.partitions > 1:
            if partition is None:
                partition = self._layout.route(values, 0 if self._layout.key else self.high_watermark() + 1)
            params += (partition,)
        try:
            cur = conn.execute(self._layout.insert_sql(lineage=lineage, ignore_duplicates=ignore_duplicates), params)
        except (sqlite3.IntegrityError, OverflowError) as exc:
            raise self._layout.explain_write_error(exc, [values], conn=conn) from None
        if cur.rowcount == 0:
            return None
        row_id = cur.lastrowid
        ledger = self.source._ledger
        if ledger.on_event is not None:
            ledger.emit(Event("message_appended", self.name, row_id, {"payload": model.model_dump(mode="json")}))
        return row_id

    def _insert_many_in_current_transaction(
        self, models: list[ModelT], *, status: str = "new", ignore_duplicates: bool = False,
        now: str | None = None,
    ) -> int:
        encode = self._encode
        try:
            encoded = [encode(m) for m in models]
        except InvalidRecordError:  # nothing written yet: name the row, as pydantic's loc does
            for i, m in enumerate(models):
                try:
                    encode(m)
                except InvalidRecordError as exc:
                    prefix = f"topic {self.name!r}, "
                    text = str(exc).removeprefix(prefix)
                    raise InvalidRecordError(f"{prefix}row {i}, {text}") from None
            raise
        return self._insert_encoded_in_current_transaction(models, encoded, status=status,
                                                           ignore_duplicates=ignore_duplicates, now=now)

    def _insert_encoded_in_current_transaction(
        self, models: list[ModelT], encoded: list[tuple], *, status: str = "new", ignore_duplicates: bool = False,
        now: str | None = None,
    ) -> int:
        """Insert rows already encoded by ``self._encode`` (``encoded[i]`` is ``models[i]``'s)."""
        conn = self._conn
        now = now or utc_now()
        stamp = (now, "new")  # rows appended as handled are marked below (a row's state is not a column)
        values = [e + stamp for e in encoded]
        ledger = self.source._ledger
        before = self.high_watermark()
        values = self._layout.with_partitions(values, before + 1)
        changes = conn.total_changes
        try:
            conn.executemany(self._layout.insert_sql(ignore_duplicates=ignore_duplicates), values)
        except (sqlite3.IntegrityError, OverflowError) as exc:
            raise self._layout.explain_write_error(exc, values, conn=conn, existing_upto=before) from None
        written = conn.total_changes - changes
        if status == "handled" and written:
            acks.mark_appended_handled_in_current_transaction(conn, self.name, before, now)
        if ledger.on_event and written:
            self._emit_appended_in_current_transaction(models if written == len(models) else None, before)
        return written

    def _emit_appended_in_current_transaction(self, models: list[ModelT] | None, after: int) -> None:
        """message_appended for each row above ``after`` (``models``: the rows, when all were written)."""
        ledger = self.source._ledger
        if models is None:
            rows = self._conn.execute(f"{self._layout.select_sql()} WHERE \"_id\" > ? ORDER BY \"_id\"", (after,))
            pairs = [(row[0], self.model.model_validate(self._decode(row))) for row in rows]
        else:
            ids = [r[0] for r in self._conn.execute(
                f"SELECT \"_id\" FROM {self._layout.table} WHERE \"_id\" > ? ORDER BY \"_id\"", (after,))]
            pairs = list(zip(ids, models))
        for row_id, model in pairs:
            ledger.emit(Event("message_appended", self.name, row_id, {"payload": model.model_dump(mode="json")}))

    # -- reading ----------------------------------------------------------------
    def high_watermark(self) -> int:
        """The largest id stored (0 for an empty topic)."""
        row = self._conn.execute(f"SELECT max(\"_id\") FROM {self._layout.table}").fetchone()
        return row[0] or 0

    def _consumer_id(self, consumer: str | None) -> int | None:
        if consumer is None:
            return None
        return acks.require_consumer(self._conn, self.name, consumer)

    def _status_filter(self, status: str | None, consumer_id: int | None) -> tuple[str, tuple]:
        if status is None:
            return "1", ()
        if status == "new":
            return acks.pending_filter(consumer_id, self.name)
        return acks.done_filter(consumer_id, self.name)

    def _rows(self, status: str | None, consumer: str | None, *, upto: int | None = None) -> Iterator[tuple]:
        """Rows in id order, read in pages so acks during iteration are safe."""
        check_status(status)
        consumer_id = self._consumer_id(consumer)
        where, params = self._status_filter(status, consumer_id)
        upto = self.high_watermark() if upto is None else upto
        sql = (
            f"{self._layout.select_sql()} WHERE {where} AND \"_id\" > ? AND \"_id\" <= ? "
            f"ORDER BY \"_id\" LIMIT {PAGE}"
        )
        last = 0
        while True:
            page = self._conn.execute(sql, (*params, last, upto)).fetchall()
            if not page:
                return
            yield from page
            last = page[-1][0]

    def _record(self, row: tuple, consumer: str | None, status: str | None = None,
                data: ModelT | None = None) -> Record[ModelT]:
        """A Record from a ``select_sql`` row; ``status`` None reads the topic-wide status."""
        if data is None:
            data = self.model.model_validate(self._decode(row))
        partition = row[self._layout.partition_index]
        if status is None:
            status = acks.status_of(row[2], row[0], partition, acks.handled_positions(self._conn, self.name))
        return Record(
            id=row[0], topic=self.name, created_at=parse_timestamp(row[1]),
            handled_at=parse_timestamp(row[3]), status=status, data=data,
            parent_id=row[4], parent_topic=row[5], run_id=row[6], consumer=consumer, partition=partition,
            _topic=self,
        )

    def _iter(self, status: str, records: bool, as_dict: bool, consumer: str | None):
        if records and as_dict:
            raise ValueError("records and as_dict cannot both be True")
        for row in self._rows(status, consumer):
            if as_dict:
                yield self._decode(row)
            elif records:
                yield self._record(row, consumer, status)
            else:
                yield self.model.model_validate(self._decode(row))

    def iter_new(self, *, records: bool = False, as_dict: bool = False, consumer: str | None = None):
        """Iterate rows still new (for ``consumer``, or for anyone), oldest first.

        Rows appended after iteration starts are not included (the next call sees them).

        Args:
            records: yield Record objects (with id, times, ``ack()``).
            as_dict: yield plain dicts of field values.
            consumer: a registered consumer name; None for the topic-wide status.

        Raises:
            ValueError: both records and as_dict.
            ConsumerNotFoundError: unknown consumer.
        """
        return self._iter("new", records, as_dict, consumer)

    def iter_handled(self, *, records: bool = False, as_dict: bool = False, consumer: str | None = None):
        """Iterate handled rows (acked by ``consumer``, or by every consumer), oldest first."""
        return self._iter("handled", records, as_dict, consumer)

    def get(self, _id: int) -> Record[ModelT]:
        """The record with id ``_id``.

        Raises:
            RecordNotFoundError: no such id.
        """
        row = self._conn.execute(f"{self._layout.select_sql()} WHERE \"_id\" = ?", (_id,)).fetchone()
        if row is None:
            raise RecordNotFoundError(f"topic {self.name!r} has no record with id {_id!r}")
        return self._record(row, None)

    def count(self, status: str | None = None, *, consumer: str | None = None) -> int:
        """Number of rows, optionally only 'new' or 'handled' (for ``consumer``).

        Raises:
            UnknownStatusError: status is not None, 'new' or 'handled'.
        """
        check_status(status)
        where, params = self._status_filter(status, self._consumer_id(consumer))
        sql = f"SELECT count(*) FROM {self._layout.table} WHERE {where}"
        return self._conn.execute(sql, params).fetchone()[0]

    # -- acking -----------------------------------------------------------------
    def set_handled(self, _id: int | None = None, *, record: Record | None = None, consumer: str | None = None) -> None:
        """Ack one row (by id or record), for ``consumer`` or for every consumer; idempotent.

        Raises:
            ValueError: neither _id nor record given.
            RecordNotFoundError: no such id in this topic.

        Emits:
            message_handled, after the commit, when the ack changed something.
        """
        if record is not None:
            if record.topic != self.name:
                raise ValueError(f"record {record.id} belongs to topic {record.topic!r}, not {self.name!r}")
            _id = record.id
            consumer = consumer if consumer is not None else record.consumer
        if _id is None:
            raise ValueError("set_handled requires _id or record")
        now = utc_now()
        with self.source._ledger.atomic() as conn:
            exists = conn.execute(f"SELECT 1 FROM {self._layout.table} WHERE \"_id\" = ?", (_id,)).fetchone()
            if exists is None:
                raise RecordNotFoundError(f"topic {self.name!r} has no record with id {_id!r}")
            self._ack_in_current_transaction(_id, consumer, now)
        if record is not None and record.status != "handled":
            record.status = "handled"
            record.handled_at = parse_timestamp(now)

    def _ack_in_current_transaction(self, _id: int, consumer: str | None, now: str,
                                    consumers: list[int] | None = None) -> bool:
        conn = self._conn
        consumer_id = None
        if consumer is not None:
            consumer_id = acks.register_consumer_in_current_transaction(conn, self.name, consumer, now)
            if consumers is not None and consumer_id not in consumers:
                consumers = None
        before = conn.total_changes
        handled = acks.ack_in_current_transaction(conn, self.name, _id, consumer_id, now, consumers)
        if conn.total_changes != before:
            self.source._ledger.emit(Event(
                "message_handled", self.name, _id,
                {"consumer": consumer, "status": "handled" if handled else "new"},
            ))
        return handled

    # -- streams, wake-ups, queues ------------------------------------------------
    def read_since(self, offset: int, limit: int = 1000) -> list[Record[ModelT]]:
        """The rows with id > ``offset``, oldest first, at most ``limit`` (a stateless stream read)."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an integer >= 0, got {offset!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
        rows = self._conn.execute(
            f"{self._layout.select_sql()} WHERE \"_id\" > ? ORDER BY \"_id\" LIMIT ?", (offset, limit)
        ).fetchall()
        return [self._record(row, None) for row in rows]

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the topic has rows newer than when the wait started (from any process).

        Returns:
            True when new rows arrived, False after ``timeout`` seconds.
        """
        from ..ledger.watcher import wait_until

        start = self.high_watermark()
        return bool(wait_until(self.source.watcher, lambda: self.high_watermark() > start, timeout))

    def queue(self, consumer: str, visibility_timeout: float | None = None, max_attempts: int | None = None, *,
              clock=None) -> Queue[ModelT]:
        """Consume this topic as a work queue for the named ``consumer`` (rows stay for other consumers).

        Settings left None keep the stored ones (300 s and 3 attempts for a new queue).
        """
        from .queues import Queue

        return Queue(self, consumer, visibility_timeout=visibility_timeout, max_attempts=max_attempts, clock=clock)

    # -- consumers --------------------------------------------------------------
    def consumer(self, name: str, *, start: str = "earliest") -> str:
        """Register a named consumer (idempotent).

        A new consumer starts at ``start``: "earliest" (every row is pending for it, except
        rows handled for every consumer) or "latest" (only rows appended from now on). An
        existing consumer keeps its position.
        """
        with self.source._ledger.atomic() as conn:
            acks.register_consumer_in_current_transaction(conn, self.name, name, utc_now(), start=start)
        return name

    def consumers(self) -> list[str]:
        """Names of the consumers registered on this topic."""
        return acks.consumer_names(self._conn, self.name)

    def replay(self, consumer: str, *, from_id: int | None = None, to_id: int | None = None) -> int:
        """Make rows ``from_id..to_id`` (inclusive; default all) pending again for one consumer.

        Returns:
            The number of rows made pending for that consumer.

        Raises:
            ConsumerNotFoundError: the consumer is not registered.
        """
        lo = 0 if from_id is None else from_id
        hi = 2**63 - 1 if to_id is None else to_id
        if lo > hi:
            raise ValueError(f"from_id {from_id} is greater than to_id {to_id}")
        with self.source._ledger.atomic() as conn:
            cid = acks.require_consumer(conn, self.name, consumer)
            return acks.replay_in_current_transaction(conn, self.name, cid, lo, hi, utc_now())

    def drop_consumer(self, name: str) -> None:
        """Unregister a consumer; rows every remaining consumer acked turn 'handled'."""
        with self.source._ledger.atomic() as conn:
            cid = acks.require_consumer(conn, self.name, name)
            acks.drop_consumer_in_current_transaction(conn, self.name, cid, utc_now())

    # -- streams (api/attach.py, api/retention.py) ---------------------------------------
    def attach(self, source: Any, *, background: bool = True):
        """Feed this topic from ``source`` (an object with ``stream(topic)`` and ``cancel()``).

        Returns:
            An Attachment (``.cancel()``) running the source in a background thread.
        """
        from .attach import attach

        return attach(self, source, background=background)

    def streaming(self, fn: Callable | None = None, **kwargs: Any):
        """``source.streaming(self.name, fn, **kwargs)``: windows of this topic delivered to ``fn``."""
        return self.source.streaming(self.name, fn, **kwargs)

    def set_retention(self, max_age: Any) -> None:
        """Delete rows every consumer handled once older than ``max_age`` (None: keep all)."""
        from .retention import set_retention

        set_retention(self.source, self.name, max_age)

    def windows(self, consumer: str, *, limit: int = 100) -> list:
        """A streaming consumer's stored windows, most recent first."""
        from ..ledger import windows as stored

        cid = acks.require_consumer(self._conn, self.name, consumer)
        return stored.windows(self._conn, cid, limit=limit)

    # -- composing ----------------------------------------------------------------
    def pipe(self, fn: Callable[[ModelT], Any], *, consumer: str | None = None, start: str = "earliest") -> Pipeline:
        """Start a pipeline: ``fn`` applied to each new row; chain ``.to(target).run()``.

        ``start``: where a new ``consumer`` starts ("earliest" or "latest", see ``consumer()``).
        """
        from .pipes import Pipeline

        return Pipeline(self, fn, consumer=consumer, start=start)

    def migrate(self, new_model: type[NewModelT], fn: Callable[[ModelT], NewModelT | dict[str, Any]]) -> Topic[NewModelT]:
        """Rewrite every row under ``new_model`` in one transaction; ids, times, status kept.

        Args:
            new_model: the new pydantic model; must still have the dedup fields.
            fn: old model instance -> new model instance or dict.

        Returns:
            The Topic bound to the new model (this object becomes unusable).

        Raises:
            DedupFieldError: (a ValueError) the new model lacks a dedup field.
            Whatever ``fn`` or validation raised (pydantic.ValidationError for a bad row,
            as in minikafka), as an instance of both that type and MigrationError, with
            the record id in a note; nothing changed.
        """
        new_layout = TopicLayout.for_model(self.name, new_model, self.dedup, partitions=self.partitions, key=self.key)
        tmp = self.name + "__migrating"
        q_tmp = quote_identifier(tmp)
        encode = new_layout.encoder()
        meta = STORED_META_SELECT
        cols = ", ".join([meta] + [quote_identifier(n) for n in new_layout.field_names] + [f'"{PARTITION}"'])
        insert = f"INSERT INTO {q_tmp} ({cols}) VALUES ({', '.join('?' for _ in range(len(STORED_META) + len(new_layout.columns) + 1))})"
        at_partition = self._layout.partition_index
        current = None
        ledger = self.source._ledger
        try:
            with ledger.atomic() as conn:
                conn.execute(new_layout.ddl(tmp)[0])
                for row in self._rows(None, None):
                    current = row[0]
                    out = fn(self.model.model_validate(self._decode(row)))
                    if isinstance(out, BaseModel) and not isinstance(out, new_model):
                        out = out.model_dump()
                    migrated = new_model.model_validate(out)
                    conn.execute(insert, (*stored_meta(row), *encode(migrated), row[at_partition]))
                current = None
                for statement in self._layout.drop_views_ddl():
                    conn.execute(statement)
                conn.execute(f"DROP TABLE {self._layout.table}")  # drops its trigger and indexes too
                conn.execute(f"ALTER TABLE {q_tmp} RENAME TO {new_layout.table}")
                for statement in new_layout.ddl()[1:]:
                    conn.execute(statement)
                conn.execute(
                    "UPDATE _minikafka_topics SET model_name = ?, json_schema = ?, fingerprint = ?, "
                    "columns = ?, migrated_at = ? WHERE name = ?",
                    (f"{new_model.__module__}:{new_model.__qualname__}", canonical_json(new_layout.json_schema), new_layout.fingerprint,
                     new_layout.describe_columns(), utc_now(), self.name),
                )
        except Exception as exc:
            where = f" at record {current}" if current is not None else ""
            failure = migration_failure(exc, f"migration of topic {self.name!r} failed{where}: {exc}")
            if failure is exc:
                raise
            raise failure from exc
        return self.source._bind(new_layout, new_layout.fingerprint)

    # -- export -----------------------------------------------------------------
    def to_arrow(self, status: str | None = None, *, consumer: str | None = None):
        """The topic (or its new/handled rows) as a pyarrow Table, metadata columns first."""
        from ..ledger.arrow import rows_to_arrow

        handled = acks.handled_positions(self._conn, self.name)
        at = self._layout.partition_index
        rows = ((r[0], r[1], acks.status_of(r[2], r[0], r[at], handled), *r[3:]) for r in self._rows(status, consumer))
        return rows_to_arrow(self._layout, rows, self._decode)

    def to_spark(self, spark, status: str | None = None, *, consumer: str | None = None):
        """The topic as a Spark DataFrame over JDBC (exact types; needs ``minikafka[spark]``).

        Args:
            spark: a SparkSession from ``minikafka.spark.build_session``.
            status: None for all rows, "new" or "handled".
            consumer: the consumer whose view of new/handled to use.
        """
        return engines.engine("spark").read_topic(spark, self.source, self._layout, which=status or "all", consumer=consumer)

    def to_polars(self, status: str | None = None, *, consumer: str | None = None, metadata: bool = False):
        """The topic as a polars DataFrame, one column per model field (as in minikafka).

        Nested models and lists become struct and list columns (through Arrow).

        Args:
            status: None for all rows, "new" or "handled".
            consumer: the consumer whose view of new/handled to use.
            metadata: also include the metadata columns (_id, _created_at, _status, ...).

        Raises:
            MissingDependencyError: polars is not installed (``pip install minikafka[polars]``).
        """
        from ..util.optional import require

        pl = require("polars", "polars")
        table = self.to_arrow(status, consumer=consumer)
        if not metadata:
            table = table.select(self._layout.field_names)
        return pl.from_arrow(table)

    def to_pandas(self, status: str | None = None, *, consumer: str | None = None):
        """The topic as a pandas DataFrame (needs pandas: ``pip install minikafka[pandas]``)."""
        from ..util.optional import require

        require("pandas", "pandas")
        return self.to_arrow(status, consumer=consumer).to_pandas()



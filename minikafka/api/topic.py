"""Topic: a typed, append-only, schema-enforced ledger table (the face; ``TopicRows`` does the rows)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ..errors import InvalidSettingError, migration_failure
from ..ledger.topics import TopicLayout, acks, catalog
from ..util.clock import utc_now
from ..util.gcpause import gc_paused
from ..util.timeouts import check_timeout
from .core import engines
from .core.offsets import Extended, Offset, with_offset
from .core.record import Record
from .core.rows import LayoutNames, RecordNotFoundError, TopicRows, check_on_duplicate, check_status
from .core.transaction import Transaction, joined
from .core.unknown import UnknownFields, keep_fields

if TYPE_CHECKING:
    from .modes.pipes import Pipeline
    from .modes.queues import Queue
    from .source import Source

ModelT = TypeVar("ModelT", bound=BaseModel)
NewModelT = TypeVar("NewModelT", bound=BaseModel)

__all__ = ["RecordNotFoundError", "Topic", "check_on_duplicate", "check_status"]


class Topic(LayoutNames[ModelT]):
    """A named, typed, append-only log stored as one STRICT table.

    Get one from ``Source.topic(name, Model, dedup=...)``. ``rows`` is its ``TopicRows``:
    the row-level layer (validate, insert, read, ack) the modes and connectors use.
    """

    rows_class: type[TopicRows] = TopicRows

    def __init__(self, source: Source, layout: TopicLayout, fingerprint: str):
        self.source = source
        self._layout = layout
        self._fingerprint = fingerprint
        self.rows: TopicRows[ModelT] = self.rows_class(source.ledger, layout, fingerprint, source._fingerprints)

    @property
    def _unknown(self) -> UnknownFields:
        """The unknown-field policy in force (made on first use: subclasses have their own __init__)."""
        unknown = self.__dict__.get("_unknown_fields")
        if unknown is None:
            unknown = self.__dict__["_unknown_fields"] = self._unknown_policy("drop")
        return unknown

    def _unknown_policy(self, policy: str) -> UnknownFields:
        unknown = UnknownFields(self.name, self.model, policy)
        unknown.active &= type(self.rows).validate is TopicRows.validate  # a stream keeps every key
        return unknown

    @property
    def unknown_fields(self) -> str:
        """What an appended dict's field the model lacks does: "drop" (stored without it, a
        warning names it; the default), "quarantine" (``UnknownFieldError``, nothing written)
        or "evolve" (a model with ``extra="allow"``); see ``docs/how-to/schema-evolution.md``."""
        return self._unknown.policy

    @unknown_fields.setter
    def unknown_fields(self, policy: str) -> None:
        self.__dict__["_unknown_fields"] = self._unknown_policy(policy)

    # -- identity (name, model, dedup: LayoutNames) ------------------------------
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
    def _conn(self):
        return self.rows.conn

    # -- writing ----------------------------------------------------------------
    def append(self, payload: ModelT | dict[str, Any], partition: int | None = None, *,
               on_duplicate: str = "raise", tx: Transaction | None = None, group: bool = True) -> ModelT | None:
        """Validate and append one message.

        Args:
            payload: a model instance or a dict.
            partition: the partition to append to; by default the topic's key fields pick
                it (a stable hash), or, without key fields, rows are spread evenly.
            on_duplicate: "raise" (minikafka's behaviour) or "ignore" (return None).
            tx: join the caller's transaction (``source.transaction()``); such an append is
                never group-committed.
            group: outside a transaction, join the process's group commit (the default):
                appends from many threads (one Source each) share one durable commit, and
                each call returns once its own row is durable. False: a commit of its own.

        Returns:
            The validated model (None if ignored as a duplicate), carrying ``.offset``: the
            stored row's ``Offset(id, partition)`` (see ``minikafka.offset_of``). It is an
            instance of the topic's model and compares equal to it (minikafka's return value).

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
        if isinstance(payload, dict):
            self._unknown.check((payload,))
        model = self.rows.validate(payload)
        if self._unknown.keeps:
            with joined(self.source, tx) as conn:
                keep_fields(self.rows, conn, (model,))
        if tx is None and group and self.source.group_commit and self.source.ledger.can_group_commit:
            located = self.rows.insert_grouped(model, ignore_duplicates=ignore, partition=partition)
        else:
            with joined(self.source, tx):
                located = self.rows.insert_located_in_current_transaction(
                    model, ignore_duplicates=ignore, partition=partition)
        return None if located is None else with_offset(model, Offset(*located))

    def flush(self) -> None:
        """Wait until the appends this process has handed to the group commit are durable.

        ``append`` already returns only once its row is durable; ``flush`` is for a thread
        that wants every other thread's pending appends on this ledger committed too.
        """
        self.source.flush()

    def extend(
        self, rows: Iterable[ModelT | dict[str, Any]], *, on_duplicate: str = "raise", status: str = "new",
        tx: Transaction | None = None,
    ) -> Extended:
        """Validate and append many messages in one transaction: all or nothing.

        Args:
            rows: model instances and/or dicts.
            on_duplicate: "raise" (nothing is written) or "ignore" (skip duplicates).
            status: "new", or "handled" for history downstream consumers should skip.

        Returns:
            The number of rows written (an int), with ``.first``: the id of the first row
            written (None when none was) and ``.count``.

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
            self._unknown.check(rows)
            models = self.rows.validate_many(rows)
            with joined(self.source, tx) as conn:
                if self._unknown.keeps:
                    keep_fields(self.rows, conn, models)
                before = self.rows.high_watermark()
                written = self.rows.insert_many_in_current_transaction(models, status=status,
                                                                       ignore_duplicates=ignore)
                first = self.rows.table.first_after(before) if written else None
            return Extended(written, first)

    # -- reading ----------------------------------------------------------------
    def high_watermark(self) -> int:
        """The largest id stored (0 for an empty topic)."""
        return self.rows.high_watermark()

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
        return self.rows.iterate("new", records, as_dict, consumer)

    def iter_handled(self, *, records: bool = False, as_dict: bool = False, consumer: str | None = None):
        """Iterate handled rows (acked by ``consumer``, or by every consumer), oldest first."""
        return self.rows.iterate("handled", records, as_dict, consumer)

    def get(self, _id: int) -> Record[ModelT]:
        """The record with id ``_id``.

        Raises:
            RecordNotFoundError: no such id.
        """
        return self.rows.get(_id)

    def count(self, status: str | None = None, *, consumer: str | None = None) -> int:
        """Number of rows, optionally only 'new' or 'handled' (for ``consumer``).

        Raises:
            UnknownStatusError: status is not None, 'new' or 'handled'.
        """
        return self.rows.count(status, consumer=consumer)

    # -- acking -----------------------------------------------------------------
    def set_handled(self, _id: int | None = None, *, record: Record | None = None, consumer: str | None = None) -> None:
        """Ack one row (by id or record), for ``consumer`` or for every consumer; idempotent.

        Raises:
            ValueError: neither _id nor record given.
            RecordNotFoundError: no such id in this topic.

        Emits:
            message_handled, after the commit, when the ack changed something.
        """
        self.rows.set_handled(_id, record=record, consumer=consumer)

    # -- streams, wake-ups, queues ------------------------------------------------
    def read_since(self, offset: int, limit: int = 1000) -> list[Record[ModelT]]:
        """The rows with id > ``offset``, oldest first, at most ``limit`` (a stateless stream read)."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidSettingError(f"offset must be an integer >= 0, got {offset!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidSettingError(f"limit must be an integer >= 1, got {limit!r}")
        return [self.rows.record(row, None) for row in self.rows.read_since(offset, limit)]

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the topic has rows newer than when the wait started (from any process).

        Returns:
            True when new rows arrived, False after ``timeout`` seconds.

        Raises:
            InvalidDurationError: (a ValueError) a timeout that is not a finite number of seconds >= 0.
        """
        from ..ledger.transactions import drive

        return bool(drive(self.source.watcher, self._wait_steps(timeout)))

    async def wait_async(self, timeout: float | None = None) -> bool:
        """``wait`` for asyncio: awaits new rows without blocking the event loop (call it
        from the thread that opened the Source: the loop's). Same checks and loop as ``wait``."""
        from ..ledger.transactions import drive_async

        return bool(await drive_async(self.source.watcher, self._wait_steps(timeout)))

    def _wait_steps(self, timeout: float | None):
        """The one check and loop of ``wait`` and ``wait_async`` (``ledger.transactions.watcher.until``)."""
        from ..ledger.transactions import until

        timeout = check_timeout(timeout, "wait timeout")
        start = self.high_watermark()
        return until(self.source.watcher, lambda: self.high_watermark() > start, timeout)

    def queue(self, consumer: str, visibility_timeout: float | None = None, max_attempts: int | None = None, *,
              clock=None, result_ttl: float | None = None) -> Queue[ModelT]:
        """Consume this topic as a work queue for the named ``consumer`` (rows stay for other consumers).

        Settings left None keep the stored ones (300 s and 3 attempts for a new queue);
        ``result_ttl``: seconds a finished job's result is kept (default 7 days).
        """
        from .modes.queues import DEFAULT_RESULT_TTL, Queue

        return Queue(self, consumer, visibility_timeout=visibility_timeout, max_attempts=max_attempts, clock=clock,
                     result_ttl=DEFAULT_RESULT_TTL if result_ttl is None else result_ttl)

    # -- consumers --------------------------------------------------------------
    def consumer(self, name: str, *, start: str = "earliest") -> str:
        """Register a named consumer (idempotent).

        A new consumer starts at ``start``: "earliest" (every row is pending for it, except
        rows handled for every consumer) or "latest" (only rows appended from now on). An
        existing consumer keeps its position.
        """
        with self.source.ledger.atomic() as conn:
            acks.register_consumer_in_current_transaction(conn, self.name, name, utc_now(), start=start)
        return name

    def consumers(self) -> list[str]:
        """Names of the consumers registered on this topic."""
        return self.rows.consumers()

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
            raise InvalidSettingError(f"from_id {from_id} is greater than to_id {to_id}")
        with self.source.ledger.atomic() as conn:
            cid = acks.require_consumer(conn, self.name, consumer)
            return acks.replay_in_current_transaction(conn, self.name, cid, lo, hi, utc_now())

    def drop_consumer(self, name: str) -> None:
        """Unregister a consumer; rows every remaining consumer acked turn 'handled'."""
        with self.source.ledger.atomic() as conn:
            cid = acks.require_consumer(conn, self.name, name)
            acks.drop_consumer_in_current_transaction(conn, self.name, cid)

    # -- streams (api/modes/attach.py, api/modes/retention.py) ---------------------------------------
    def attach(self, source: Any, *, background: bool = True):
        """Feed this topic from ``source`` (an object with ``stream(topic)`` and ``cancel()``).

        Returns:
            An Attachment (``.cancel()``) running the source in a background thread.
        """
        from .modes.attach import attach

        return attach(self, source, background=background)

    def streaming(self, fn: Callable | None = None, **kwargs: Any):
        """``source.streaming(self.name, fn, **kwargs)``: windows of this topic delivered to ``fn``."""
        return self.source.streaming(self.name, fn, **kwargs)

    def set_retention(self, max_age: Any) -> None:
        """Delete rows every consumer handled once older than ``max_age`` (None: keep all)."""
        from .modes.retention import set_retention

        set_retention(self.source.ledger, self.name, max_age)

    def windows(self, consumer: str, *, limit: int = 100) -> list:
        """A streaming consumer's stored windows, most recent first."""
        from ..ledger.consuming import windows as stored

        cid = acks.require_consumer(self._conn, self.name, consumer)
        return stored.windows(self._conn, cid, limit=limit)

    # -- composing ----------------------------------------------------------------
    def pipe(self, fn: Callable[[ModelT], Any], *, consumer: str | None = None, start: str = "earliest") -> Pipeline:
        """Start a pipeline: ``fn`` applied to each new row; chain ``.to(target).run()``.

        ``start``: where a new ``consumer`` starts ("earliest" or "latest", see ``consumer()``).
        """
        from .modes.pipes import Pipeline

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
        encode = new_layout.encoder()
        current = None

        def convert(row: tuple) -> tuple:
            nonlocal current
            current = row[0]
            out = fn(self.rows.model_of_row(row))
            if isinstance(out, BaseModel) and not isinstance(out, new_model):
                out = out.model_dump()
            return encode(new_model.model_validate(out))

        try:
            with self.source.ledger.atomic() as conn:
                self.rows.table.replace_in_current_transaction(new_layout, convert)
                current = None
                catalog.record_migration_in_current_transaction(
                    conn, new_layout, f"{new_model.__module__}:{new_model.__qualname__}", utc_now())
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
        from ..ledger.topics import rows_to_arrow

        handled = acks.handled_positions(self._conn, self.name)
        at = self._layout.partition_index
        rows = ((r[0], r[1], acks.status_of(r[2], r[0], r[at], handled), *r[3:]) for r in self.rows.scan(status, consumer))
        return rows_to_arrow(self._layout, rows, self.rows.decode)

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

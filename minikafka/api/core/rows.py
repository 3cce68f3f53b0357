"""TopicRows: the rows of one topic table, the layer every mode works on.

Validate and encode payloads, insert them (``*_in_current_transaction``: the caller owns
the transaction), read rows in pages, turn rows into Records and models, count and ack:
what needs the topic's model. The statements themselves are ``ledger.topics.table.TopicTable``'s
(``self.table``), the one reader and writer of a topic's rows.
``Topic`` (the face) delegates to it; pipes, queues, groups, streaming and the connectors
take a ``TopicRows`` and never a Topic's internals. ``StreamRows`` is the variant for
schemaless streams (payloads are dicts, stored as JSON text).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter

from ...errors import (
    InvalidRecordError,
    InvalidSettingError,
    RecordNotFoundError,  # noqa: F401 (re-exported where it used to live),
    SchemaMismatchError,
    UnknownStatusError,
)
from ...ledger.topics import N_META, PAGE, TopicLayout, TopicTable, acks, counts, insert_params, json_value_refusal
from ...ledger.transactions import Event, Ledger
from ...util.clock import parse_timestamp, utc_now
from .record import Record

ModelT = TypeVar("ModelT", bound=BaseModel)

STATUSES = ("new", "handled")


def check_status(status: str | None, *, allow_none: bool = True) -> str | None:
    if status is None and allow_none:
        return None
    if status not in STATUSES:
        raise UnknownStatusError(f"unknown status {status!r}: use 'new' or 'handled'")
    return status


def check_on_duplicate(value: str) -> bool:
    if value not in ("raise", "ignore"):
        raise InvalidSettingError(f"on_duplicate must be 'raise' or 'ignore', got {value!r}")
    return value == "ignore"


class LayoutNames(Generic[ModelT]):
    """A topic's identity read from its layout: ``name``, ``model``, ``dedup`` (for the rows and the facade)."""

    layout: TopicLayout

    @property
    def name(self) -> str:
        return self.layout.name

    @property
    def model(self) -> type[ModelT]:
        return self.layout.model  # type: ignore[return-value]

    @property
    def dedup(self) -> tuple[str, ...]:
        return self.layout.dedup


class TopicRows(LayoutNames[ModelT]):
    """The rows of one topic table on one ledger.

    Args:
        ledger: the Source's ledger.
        layout: the topic's layout (its table, columns, partitions).
        fingerprint: the layout's fingerprint when this object was made.
        fingerprints: the Source's registry {topic: current fingerprint}; when the topic is
            migrated, the registry moves on and this object refuses to be used.
    """

    is_stream = False

    def __init__(self, ledger: Ledger, layout: TopicLayout, fingerprint: str, fingerprints: dict[str, str]):
        self.ledger = ledger
        self.layout = layout
        self.fingerprint = fingerprint
        self._fingerprints = fingerprints
        self.encode = layout.encoder()
        self.decode = layout.decoder()
        self._adapter = TypeAdapter(list[layout.model])  # type: ignore[name-defined]

    def __repr__(self) -> str:
        return f"TopicRows({self.name!r}, {self.model.__name__})"

    @property
    def conn(self) -> sqlite3.Connection:
        """The ledger's connection, once this topic is known to be current (not migrated since)."""
        conn = self.ledger.conn
        if self._fingerprints.get(self.name) != self.fingerprint:
            raise SchemaMismatchError(
                f"topic {self.name!r} was migrated or evolved; use the Topic returned by migrate() or evolve()"
            )
        return conn

    @property
    def table(self) -> TopicTable:
        """The topic's table on the ledger's connection (once the topic is known to be current)."""
        return TopicTable(self.conn, self.layout)

    # -- validating ------------------------------------------------------------------
    def validate(self, payload: Any) -> ModelT:
        """``payload`` (a model instance or a dict) as an instance of the topic's model.

        Raises:
            pydantic.ValidationError: it does not fit the model.
        """
        if isinstance(payload, self.model):
            return payload
        if isinstance(payload, BaseModel):
            payload = payload.model_dump()
        return self.model.model_validate(payload)

    def validate_many(self, rows: list[Any]) -> list[ModelT]:
        """Many payloads at once (the error's loc names the row index)."""
        return self._adapter.validate_python(rows)

    def model_of_row(self, row: tuple) -> ModelT:
        """The model of a ``layout.select_sql()`` row."""
        return self.model.model_validate(self.decode(row))

    def value_of_row(self, row: tuple) -> Any:
        """What plain iteration yields for a row (the model; a stream's dict)."""
        return self.model_of_row(row)

    # -- writing ---------------------------------------------------------------------
    def insert_one_in_current_transaction(
        self, model: ModelT, *, parent_id: int | None = None, parent_topic: str | None = None,
        run_id: str | None = None, ignore_duplicates: bool = False, now: str | None = None,
        partition: int | None = None,
    ) -> int | None:
        """Insert one validated model; returns its id (None when ignored as duplicate).

        Emits:
            message_appended (queued until the commit).
        """
        located = self.insert_located_in_current_transaction(
            model, parent_id=parent_id, parent_topic=parent_topic, run_id=run_id,
            ignore_duplicates=ignore_duplicates, now=now, partition=partition)
        return None if located is None else located[0]

    def insert_located_in_current_transaction(
        self, model: ModelT, *, parent_id: int | None = None, parent_topic: str | None = None,
        run_id: str | None = None, ignore_duplicates: bool = False, now: str | None = None,
        partition: int | None = None,
    ) -> tuple[int, int] | None:
        """As ``insert_one_in_current_transaction``, returning (id, partition) of the stored row."""
        conn = self.conn
        values = self.encode(model)
        row_id, partition = self._insert_row(conn, values, parent_id=parent_id, parent_topic=parent_topic,
                                             run_id=run_id, ignore_duplicates=ignore_duplicates, now=now,
                                             partition=partition)
        if row_id is None:
            return None
        if self.ledger.on_event is not None:
            self.ledger.emit(Event("message_appended", self.name, row_id, {"payload": model.model_dump(mode="json")}))
        return row_id, partition

    def _insert_row(self, conn: sqlite3.Connection, values: tuple, *, parent_id: int | None = None,
                    parent_topic: str | None = None, run_id: str | None = None, ignore_duplicates: bool = False,
                    now: str | None = None, partition: int | None = None) -> tuple[int | None, int]:
        """INSERT one encoded row on ``conn``; (id or None when ignored, partition)."""
        lineage = (parent_id, parent_topic, run_id) if parent_id is not None or run_id is not None else None
        return TopicTable(conn, self.layout).insert_one_in_current_transaction(
            values, now or utc_now(), lineage=lineage, ignore_duplicates=ignore_duplicates, partition=partition)

    def insert_grouped(self, model: ModelT, *, ignore_duplicates: bool = False,
                       partition: int | None = None) -> tuple[int, int] | None:
        """Insert one validated model in the process's next group commit (``ledger.transactions.group_commit``).

        Returns (id, partition) once the row is durable (None when ignored as a duplicate); a
        duplicate or unstorable row fails this call only. Use only outside a transaction
        (``ledger.can_group_commit``).

        Emits:
            message_appended, after the commit.
        """
        _ = self.conn  # the topic is current and the Source is ours
        values = self.encode(model)

        def work(conn: sqlite3.Connection) -> tuple[int | None, int]:
            return self._insert_row(conn, values, ignore_duplicates=ignore_duplicates, partition=partition)

        row_id, partition = self.ledger.group_commit(work)
        if row_id is None:
            return None
        if self.ledger.on_event is not None:
            self.ledger.emit(Event("message_appended", self.name, row_id, {"payload": model.model_dump(mode="json")}))
        return row_id, partition

    def insert_many_in_current_transaction(
        self, models: list[ModelT], *, status: str = "new", ignore_duplicates: bool = False,
        now: str | None = None,
    ) -> int:
        """Encode and insert validated models; returns the number written.

        Raises:
            InvalidRecordError: a value the ledger cannot store (names the row); nothing written.
        """
        encode = self.encode
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
        return self.insert_encoded_in_current_transaction(models, encoded, status=status,
                                                          ignore_duplicates=ignore_duplicates, now=now)

    def insert_encoded_in_current_transaction(
        self, models: list[ModelT], encoded: list[tuple], *, status: str = "new", ignore_duplicates: bool = False,
        now: str | None = None,
    ) -> int:
        """Insert rows already encoded by ``self.encode`` (``encoded[i]`` is ``models[i]``'s)."""
        table = self.table
        now = now or utc_now()
        before = table.high_watermark()
        written = table.insert_params_in_current_transaction(insert_params(encoded, now), lineage=False,
                                                             ignore_duplicates=ignore_duplicates, after=before)
        if status == "handled" and written:  # a row's state is not a column: marked after the insert
            acks.mark_appended_handled_in_current_transaction(table.conn, self.name, before, now)
        if self.ledger.on_event and written:
            self._emit_appended_in_current_transaction(models if written == len(models) else None, before)
        return written

    def _emit_appended_in_current_transaction(self, models: list[ModelT] | None, after: int) -> None:
        """message_appended for each row above ``after`` (``models``: the rows, when all were written)."""
        if models is None:
            rows = [row for page in self.table.scan(after=after) for row in page]
            pairs = [(row[0], self.model_of_row(row)) for row in rows]
        else:
            pairs = list(zip(self.table.ids_after(after), models))
        for row_id, model in pairs:
            self.ledger.emit(Event("message_appended", self.name, row_id, {"payload": model.model_dump(mode="json")}))

    # -- reading ---------------------------------------------------------------------
    def high_watermark(self) -> int:
        """The largest id stored (0 for an empty topic)."""
        return self.table.high_watermark()

    def consumer_id(self, consumer: str | None) -> int | None:
        """The registered consumer's id (None for None).

        Raises:
            ConsumerNotFoundError: not registered on this topic.
        """
        if consumer is None:
            return None
        return acks.require_consumer(self.conn, self.name, consumer)

    def status_filter(self, status: str | None, consumer_id: int | None) -> tuple[str, tuple]:
        if status is None:
            return "1", ()
        if status == "new":
            return acks.pending_filter(consumer_id, self.name)
        return acks.done_filter(consumer_id, self.name)

    def scan(self, status: str | None, consumer: str | None, *, upto: int | None = None) -> Iterator[tuple]:
        """``layout.select_sql()`` rows in id order, read in pages so acks during iteration are safe."""
        check_status(status)
        consumer_id = self.consumer_id(consumer)
        where, params = self.status_filter(status, consumer_id)
        table = self.table
        upto = table.high_watermark() if upto is None else upto
        for page in table.scan(where, params, upto=upto):
            yield from page

    def record(self, row: tuple, consumer: str | None, status: str | None = None,
               data: ModelT | None = None) -> Record[ModelT]:
        """A Record from a ``select_sql`` row; ``status`` None reads the topic-wide status."""
        if data is None:
            data = self.model_of_row(row)
        partition = row[self.layout.partition_index]
        if status is None:
            status = acks.status_of(row[2], row[0], partition, acks.handled_positions(self.conn, self.name))
        return Record(
            id=row[0], topic=self.name, created_at=parse_timestamp(row[1]),
            handled_at=parse_timestamp(row[3]), status=status, data=data,
            parent_id=row[4], parent_topic=row[5], run_id=row[6], consumer=consumer, partition=partition,
            _topic=self,
        )

    def iterate(self, status: str, records: bool, as_dict: bool, consumer: str | None) -> Iterator[Any]:
        """Rows of ``status`` as Records, dicts or models (``Topic.iter_new``/``iter_handled``)."""
        if records and as_dict:
            raise InvalidSettingError("records and as_dict cannot both be True")
        for row in self.scan(status, consumer):
            if as_dict:
                yield self.decode(row)
            elif records:
                yield self.record(row, consumer, status)
            else:
                yield self.model_of_row(row)

    def get(self, _id: int) -> Record[ModelT]:
        """The record with id ``_id``.

        Raises:
            RecordNotFoundError: no such id.
        """
        row = self.table.row(_id)
        if row is None:
            raise RecordNotFoundError(f"topic {self.name!r} has no record with id {_id!r}")
        return self.record(row, None)

    def exists(self, _id: int) -> bool:
        """Whether the topic has a row with id ``_id``."""
        return self.table.exists(_id)

    def is_handled(self, _id: int, consumer: str) -> bool:
        """Whether the row ``_id`` is acked for ``consumer`` (False when there is no such row)."""
        where, params = acks.done_filter(self.consumer_id(consumer), self.name)
        return self.table.exists(_id, where, params)

    def load(self, ids: list[int]) -> dict[int, ModelT]:
        """{id: model} of the rows with these ids (missing ids are left out)."""
        return {row[0]: self.model_of_row(row) for row in self.table.rows_by_id(ids)}

    def read_since(self, offset: int, limit: int) -> list[tuple]:
        """``select_sql`` rows with id > ``offset``, oldest first, at most ``limit``."""
        return self.table.page(offset, limit)

    def count(self, status: str | None = None, *, consumer: str | None = None) -> int:
        """Number of rows, optionally only 'new' or 'handled' (for ``consumer``).

        Raises:
            UnknownStatusError: status is not None, 'new' or 'handled'.
        """
        check_status(status)
        consumer_id = self.consumer_id(consumer)
        if status is None:
            return counts.total_rows(self.conn, self.name)
        if consumer_id is None:
            tally = counts.topic_counts(self.conn, self.name)
            return tally.new if status == "new" else tally.handled
        pending = sum(counts.pending_counts(self.conn, self.name, consumer_id).values())
        return pending if status == "new" else counts.total_rows(self.conn, self.name) - pending

    # -- acking ------------------------------------------------------------------------
    def set_handled(self, _id: int | None = None, *, record: Record | None = None, consumer: str | None = None) -> None:
        """What ``Topic.set_handled`` does (its docstring gives the errors and the event)."""
        if record is not None:
            if record.topic != self.name:
                raise InvalidSettingError(f"record {record.id} belongs to topic {record.topic!r}, not {self.name!r}")
            _id = record.id
            consumer = consumer if consumer is not None else record.consumer
        if _id is None:
            raise InvalidSettingError("set_handled requires _id or record")
        now = utc_now()
        with self.ledger.atomic() as conn:
            if not TopicTable(conn, self.layout).exists(_id):
                raise RecordNotFoundError(f"topic {self.name!r} has no record with id {_id!r}")
            self.ack_in_current_transaction(_id, consumer, now)
        if record is not None and record.status != "handled":
            record.status = "handled"
            record.handled_at = parse_timestamp(now)

    def ack_in_current_transaction(self, _id: int, consumer: str | None, now: str,
                                   consumers: list[int] | None = None) -> bool:
        """Ack row ``_id`` for ``consumer`` (registered if new) or for everyone; True when it is handled now.

        Emits:
            message_handled (queued until the commit) when the ack changed something.
        """
        conn = self.conn
        consumer_id = None
        if consumer is not None:
            consumer_id = acks.register_consumer_in_current_transaction(conn, self.name, consumer, now)
            if consumers is not None and consumer_id not in consumers:
                consumers = None
        before = conn.total_changes
        handled = acks.ack_in_current_transaction(conn, self.name, _id, consumer_id, now, consumers)
        if conn.total_changes != before:
            self.ledger.emit(Event(
                "message_handled", self.name, _id,
                {"consumer": consumer, "status": "handled" if handled else "new"},
            ))
        return handled

    def consumers(self) -> list[str]:
        """Names of the consumers registered on this topic."""
        return acks.consumer_names(self.conn, self.name)


class StreamRows(TopicRows):
    """The rows of a schemaless stream: payloads are JSON objects (dicts), read back as dicts."""

    is_stream = True

    def validate(self, payload: Any) -> Any:
        """``payload`` (a dict, a pydantic model, or a JsonObject) as the stream's JsonObject.

        Raises:
            InvalidRecordError: not a JSON object, or a value inside that JSON cannot hold
                faithfully (NaN, infinity, datetime, Decimal, set, bytes, a non-str key, an
                object...), naming its path (``$.a.b``): the rule notifications share
                (``columns.json_value_refusal``).
        """
        if isinstance(payload, self.model):
            payload = payload.data
        elif isinstance(payload, BaseModel):
            payload = payload.model_dump(mode="json")
        if not isinstance(payload, dict):
            raise InvalidRecordError(
                f"stream {self.name!r} takes JSON objects (dicts), got {type(payload).__name__}: {payload!r:.200}")
        problem = json_value_refusal(payload, "$")
        if problem is not None:
            raise InvalidRecordError(f"stream {self.name!r}: {problem}")
        return self.model(data=payload)

    def value_of_row(self, row: tuple) -> Any:
        return stream_data(row)

    def record(self, row: tuple, consumer: str | None, status: str | None = None, data: Any = None) -> Record:
        return Record(id=row[0], topic=self.name, created_at=parse_timestamp(row[1]),
                      handled_at=parse_timestamp(row[3]), status=status or row[2], data=stream_data(row),
                      parent_id=row[4], parent_topic=row[5], run_id=row[6], consumer=consumer, _topic=self)

    def iterate(self, status: str, records: bool, as_dict: bool, consumer: str | None) -> Iterator[Any]:
        if records and as_dict:
            raise InvalidSettingError("records and as_dict cannot both be True")
        for row in self.scan(status, consumer):
            if records:
                yield self.record(row, consumer, status if consumer else None)
            else:
                yield stream_data(row)


def stream_data(row: tuple) -> dict[str, Any]:
    """The JSON object a stream row holds."""
    return json.loads(row[N_META])


def rows_of(topic: Any) -> TopicRows:
    """The TopicRows of a Topic (its ``rows``), or ``topic`` itself when it is one."""
    return topic if isinstance(topic, TopicRows) else topic.rows


__all__ = ["PAGE", "STATUSES", "RecordNotFoundError", "StreamRows", "TopicRows", "check_on_duplicate",
           "check_status", "rows_of", "stream_data"]

"""Source: one SQLite file (or ":memory:") holding topics, consumers, runs and quarantine."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ..errors import ArgumentTypeError, SchemaMismatchError
from ..ledger.consuming import list_quarantined, read_runs
from ..ledger.topics import TopicLayout, acks, catalog
from ..ledger.transactions import Event, Ledger, Observer
from ..util.clock import utc_now
from .modes.groups import ConsumerGroup
from .modes.pipes import FullPipeline, Pipeline
from .table import KeyedTable
from .topic import Topic

if TYPE_CHECKING:
    from ..ledger.transactions import Watcher
    from .core.notifications import Listener
    from .core.transaction import Transaction
    from .modes.queues import Queue

ModelT = TypeVar("ModelT", bound=BaseModel)

model_path = catalog.model_path

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "<required>"})()


class Source:
    """One SQLite ledger file. Use it as a context manager.

    Opening writes nothing when the file's schema is current (no write lock either); a
    new file gets the schema, and a file of an older format is upgraded, when opened
    for writing.

    Args:
        path: a file path (created if missing, as in minikafka, with its missing
            directories; ``create=False`` creates nothing) or ":memory:".
        on_event: called as ``on_event(event_name, **kwargs)`` (minikafka's convention)
            after each commit it reports; exceptions raised by it are swallowed. An
            observer taking one argument annotated ``Event`` gets the Event object.
        busy_timeout: seconds to wait for another writer before failing.
        create: False: a missing file is a ``LedgerNotFoundError`` instead of a new ledger.
        read_only: open the file read-only (SQLite ``mode=ro``, or ``immutable=1`` in a
            read-only directory): it never writes, never waits behind a writer, and
            works on read-only mounts and snapshots. Every write raises
            ``ReadOnlyLedgerError``. Implies create=False.
        group_commit: single ``append`` calls outside a transaction join this process's
            group commit on the file (default): threads appending at once share one fsync,
            each call returning once its own row is durable. False: one commit per append.

    Raises:
        LedgerNotFoundError: (a LedgerError) with create=False or read_only=True: no
            file, or no ledger in it, at ``path``.
        LedgerUpgradeRequiredError: (a LedgerError) read_only=True on a file of an older
            format (the upgrade is a write).
        LedgerError: the file cannot be opened as a ledger.
    """

    def __init__(self, path: str | Path, on_event: Observer | None = None, *, busy_timeout: float = 30.0,
                 create: bool = True, read_only: bool = False, group_commit: bool = True):
        self.path = str(path)
        self.group_commit = bool(group_commit)
        self._ledger = Ledger(self.path, on_event=on_event, busy_timeout=busy_timeout, create=create,
                              read_only=read_only)
        self._topics: dict[str, Topic] = {}
        self._fingerprints: dict[str, str] = {}
        self._watcher: Watcher | None = None

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Source({self.path!r}{', read_only=True' if self.read_only else ''})"

    @property
    def ledger(self) -> Ledger:
        """The ledger under this Source (``minikafka.ledger.transactions.connection.Ledger``): its sqlite3
        connection (``.conn``), ``atomic()`` transactions and event emission, for tools built on
        the library (as sqlite-utils' ``Database.conn``). Writing the ledger's own tables
        directly bypasses its checks; use the functions in ``minikafka.ledger``."""
        return self._ledger

    @property
    def read_only(self) -> bool:
        """True when opened with read_only=True: every write raises ReadOnlyLedgerError."""
        return self._ledger.read_only

    @property
    def _conn(self) -> sqlite3.Connection:
        """The sqlite3 connection (minikafka's attribute name; closed when the Source is)."""
        return self._ledger.conn

    @property
    def on_event(self) -> Observer | None:
        return self._ledger.on_event

    @on_event.setter
    def on_event(self, observer: Observer | None) -> None:
        self._ledger.on_event = observer

    def close(self) -> None:
        """Close the connection (and stop the watcher); later use raises SourceClosedError. Idempotent."""
        if self._watcher is not None:
            self._watcher.close()
        self._ledger.close()

    def flush(self) -> None:
        """Wait until every append this process handed to the group commit on this file is durable."""
        from ..ledger.transactions import flush

        _ = self._ledger.conn  # open and ours
        flush(self.path)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One write transaction that ``tx=`` writes, the caller's SQL and notifications join.

        Yields:
            ``tx`` with ``tx.execute(sql, params)``, ``tx.query(sql, params) -> list[dict]`` and
            ``tx.notify(channel, payload)``. A clean exit commits all of it; an exception rolls
            all of it back (the caller's own tables included).

        Raises:
            TransactionError: a transaction is already open on this Source.
        """
        from .core.transaction import open_transaction

        with open_transaction(self) as tx:
            yield tx

    # -- wake-ups, notifications, queues -------------------------------------------
    @property
    def watcher(self) -> Watcher:
        """The Source's watcher (started on the first wait): wakes waiters on commits by any process."""
        if self._watcher is None:
            from ..ledger.transactions import Watcher

            self._ledger.conn  # noqa: B018 - a closed Source gets no watcher
            self._watcher = Watcher(self.path)
        return self._watcher

    def listen(self, channel: str, timeout: float | None = None) -> Listener:
        """Iterate the notifications on ``channel`` committed after this call (no history).

        Iteration ends after ``timeout`` seconds without a notification (never with None).
        """
        from .core.notifications import Listener

        return Listener(self, channel, timeout)

    def listen_async(self, channel: str, timeout: float | None = None) -> Listener:
        """``listen`` for asyncio: ``async for n in source.listen_async("jobs")`` awaits each
        notification without blocking the event loop (the same Listener, iterated with async for)."""
        return self.listen(channel, timeout)

    def notify(self, channel: str, payload: Any = None) -> int:
        """Commit one notification on its own (inside a transaction use ``tx.notify``)."""
        from .core.notifications import notify_in_current_transaction

        with self._ledger.atomic() as conn:
            return notify_in_current_transaction(conn, channel, payload)

    def prune_notifications(self, older_than: float | None = None, max_keep: int | None = None) -> int:
        """Delete notifications older than ``older_than`` seconds OR beyond the newest ``max_keep``.

        Returns:
            The number deleted (0 when neither is given).
        """
        from .core.notifications import prune_notifications

        with self._ledger.atomic() as conn:
            return prune_notifications(conn, older_than, max_keep)

    def queue(self, name: str, model: type[ModelT], visibility_timeout: float | None = None,
              max_attempts: int | None = None, *, dedup: tuple[str, ...] | None = None, clock=None,
              result_ttl: float | None = None) -> Queue[ModelT]:
        """Create (or reopen) the typed topic ``name`` and its work queue (a consumer named ``name``).

        Args:
            visibility_timeout, max_attempts: None: as stored when the queue exists, else
                300 s and 3; a value given updates the stored setting (see ``Queue``).
            clock: epoch seconds, for tests.
            result_ttl: seconds a finished job's result is kept for ``q.result`` (default 7 days).

        Raises:
            ValueError: a setting out of range; checked before the topic is created.
            SchemaMismatchError: as ``topic()``.
        """
        from .modes.queues import check_settings

        check_settings(visibility_timeout, max_attempts, clock, result_ttl)
        return self.topic(name, model, dedup=dedup).queue(
            name, visibility_timeout=visibility_timeout, max_attempts=max_attempts, clock=clock, result_ttl=result_ttl)

    def scheduler(self, *, clock=None, holder: str | None = None, lease: float = 30.0):
        """The ``Scheduler`` of this ledger's periodic jobs (``q.schedule(...)`` defines them):
        ``list``, ``pause``, ``resume``, ``remove``, ``tick`` (fire what is due if this process
        holds the leader lease) and ``run`` (tick until stopped)."""
        from .modes.schedules import Scheduler

        return Scheduler(self, clock=clock, holder=holder, lease=lease)

    # -- topics -----------------------------------------------------------------
    def topic(self, name: str, model: type[ModelT], dedup: Sequence[str] | str | None = REQUIRED,
              partitions: int | None = None, key: Sequence[str] | str | None = None, *,
              evolve: bool = False, unknown_fields: str | None = None) -> Topic[ModelT]:
        """Create or reopen the topic ``name`` typed by ``model``.

        Args:
            name: letters, digits, '_', '.', '-'; starts with a letter.
            model: a pydantic BaseModel class.
            dedup: required (as in minikafka): field names whose values must be unique in
                the topic, or None to disable dedup.
            partitions: the number of partitions (1 when the topic is created without it;
                None on reopening means "as stored").
            key: fields whose values pick a row's partition (a stable hash); None on
                reopening means "as stored".
            evolve: when the topic exists and ``model`` only adds fields that are Optional
                or have a default, add them in place first (``evolve()``); without it such a
                model is refused with a message saying so.
            unknown_fields: what an appended dict's field the model lacks does: "drop" (the
                default: stored without it, a warning names it), "quarantine" (refused with
                ``UnknownFieldError``) or "evolve" (a model with ``extra="allow"``).

        Returns:
            The Topic.

        Raises:
            InvalidNameError: a bad topic or field name.
            UnsupportedTypeError: a field type the ledger cannot store.
            TypeError: ``dedup`` was not given.
            DedupFieldError: (a ValueError) a dedup field is not on the model, or repeats.
            SchemaMismatchError: the topic exists "with a different schema" or "with a
                different dedup config", another partition count or key.
            ValueError: partitions is not an integer from 1 to 4096, or a key field is not
                on the model.

        Emits:
            topic_created, when the topic is new.
        """
        if unknown_fields is not None:  # checked before anything is created
            from .core.unknown import check_policy

            check_policy(name, unknown_fields, model)
        topic = self._topic(name, model, dedup, partitions, key, evolve)
        if unknown_fields is not None:
            topic.unknown_fields = unknown_fields
        return topic

    def _topic(self, name: str, model: type[ModelT], dedup, partitions, key, evolve: bool) -> Topic[ModelT]:
        if dedup is REQUIRED:
            raise ArgumentTypeError(
                f"source.topic({name!r}, ...) needs the keyword argument dedup: "
                "dedup=(field, ...) for unique fields, or dedup=None to disable dedup"
            )
        layout = TopicLayout.for_model(name, model, dedup, partitions=1 if partitions is None else partitions,
                                       key=key)
        conn = self._ledger.conn
        row = catalog.catalog_row(conn, name)
        if row is None:
            with self._ledger.atomic() as conn:
                row = catalog.catalog_row(conn, name)
                if row is None:
                    self._create_in_current_transaction(layout)
                    return self._bind(layout, layout.fingerprint)
        stored = catalog.layout_of_row(row)
        if partitions is None:
            layout.partitions = stored.partitions
        if key is None:
            layout.key = stored.key
        why = layout.mismatch(stored, row[4]) if evolve else None
        if why and not why.startswith(("dedup", "partition", "key")):
            evolved = self._evolve(layout, dry_run=False)[1]
            if evolved is not None:
                return evolved
        catalog.check_reopen(layout, row, conn)
        if model.model_config.get("extra") == "allow":  # the fields it kept before (unknown_fields = "evolve")
            from ..ledger.topics import evolution

            evolution.bind_kept_fields(layout, stored)
        return self._bind(layout, row[4])

    def table(self, name: str, model: type[ModelT], key: Sequence[str] | str,
              merge: dict[str, str] | None = None) -> KeyedTable[ModelT]:
        """Create or reopen the keyed table ``name``: a topic that keeps one current row per key
        and takes upserts (see ``docs/concepts/topics-and-tables.md``).

        Args:
            name: as for ``topic()``.
            model: a pydantic BaseModel class.
            key: the field(s) that identify a row.
            merge: {field: function} for columns that combine instead of taking the newest
                value: "sum", "max", "min", "first", "last" (= "replace", the default).

        Returns:
            The KeyedTable (a Topic: consumers read its versions as new rows).

        Raises:
            InvalidSettingError: (a ValueError) no key, a key or merge field not on the model,
                a merge function unknown or unfit for the field's type.
            SchemaMismatchError: the name is a plain topic, or a table with another schema,
                key or merge functions; nothing is written.

        Emits:
            topic_created, when the table is new.
        """
        from ..ledger.topics import keyed

        layout = TopicLayout.for_model(name, model, None)
        spec = keyed.check_spec(layout, key, merge)
        row = catalog.catalog_row(self._ledger.conn, name)
        if row is None:
            with self._ledger.atomic() as conn:
                row = catalog.catalog_row(conn, name)
                if row is None:
                    self._create_in_current_transaction(layout)
                    keyed.create_table_in_current_transaction(conn, layout, spec, utc_now())
                    return self._bind(layout, layout.fingerprint)
        catalog.check_reopen(layout, row, self._ledger.conn)
        keyed.check_reopen(self._ledger.conn, spec)
        return self._bind(layout, row[4])

    def evolve(self, name: str, model: type[BaseModel], *, dry_run: bool = False):
        """Bring topic ``name`` to ``model`` in place when the model only adds fields.

        Fields that are ``Optional`` or have a default are added in O(1), whatever the row
        count: one ``ADD COLUMN`` each (an old row reads NULL or the default) and the stored
        schema updated, in one transaction. Any other change (a field removed, retyped,
        made required) is a rewrite of every row: ``Topic.migrate()``; with ``dry_run`` this
        returns what it would change and how many rows it rewrites, else it raises.

        Returns:
            The ``Evolution`` (``kind``: same, additive, older or rewrite; ``describe()``:
            one line per change). Nothing is written with ``dry_run``.

        Raises:
            TopicNotFoundError: no such topic.
            SchemaMismatchError: a change that needs a rewrite (without ``dry_run``), other
                dedup fields, key or partitions; nothing changed.
        """
        stored = self.layout(name)
        layout = TopicLayout.for_model(name, model, stored.dedup or None, partitions=stored.partitions,
                                       key=stored.key or None)
        return self._evolve(layout, dry_run=dry_run)[0]

    def _evolve(self, layout: TopicLayout, *, dry_run: bool):
        """(the Evolution, the Topic bound to the evolved model or None)."""
        from ..ledger.topics import evolution

        def plan_of(conn):
            row = catalog.catalog_row(conn, layout.name)
            stored = catalog.layout_of_row(row)
            why = layout.mismatch(stored, row[4])
            if why and why.startswith(("dedup", "partition", "key")):
                raise SchemaMismatchError(f"topic {layout.name!r}: {why}; evolution adds fields only")
            plan = evolution.compare(stored, row[4], layout, conn)
            if plan.kind == evolution.REWRITE:
                plan.rows = evolution.rewrite_rows(conn, layout.name)
            return plan, row

        if dry_run:
            return plan_of(self._ledger.conn)[0], None
        with self._ledger.atomic() as conn:
            plan, row = plan_of(conn)
            if plan.kind == evolution.REWRITE:
                raise SchemaMismatchError(f"topic {layout.name!r}: the model is not an additive change: "
                                          + "; ".join(plan.describe()))
            if plan.kind == evolution.ADDITIVE:
                from ..ledger.consuming import RunResult, new_run_id, write_run_in_current_transaction

                run = RunResult(new_run_id("evolve"), "evolve", stage="evolve", outputs=[layout.name],
                                details={"added": [c.name for c in plan.added], "changes": plan.describe()})
                evolution.add_fields_in_current_transaction(conn, plan, layout, catalog.model_path(layout.model),
                                                            utc_now())
                write_run_in_current_transaction(conn, run.finish("succeeded"))  # its row commits with the change
        if plan.kind == evolution.OLDER:
            return plan, None
        return plan, self._bind(layout, layout.fingerprint if plan.kind == evolution.ADDITIVE else row[4])

    def _create_in_current_transaction(self, layout: TopicLayout) -> None:
        catalog.create_topic_in_current_transaction(self._ledger.conn, layout)
        self._ledger.emit(Event("topic_created", layout.name, None, {
            "model": layout.model.__name__, "dedup": tuple(sorted(layout.dedup))}))

    def model_of(self, name: str) -> type[BaseModel]:
        """The model class of a topic: the one it was opened with, else imported from the catalog.

        Raises:
            TopicNotFoundError: no such topic.
            SchemaMismatchError: the stored model cannot be imported or no longer matches.
        """
        if name in self._topics:
            return self._topics[name].model
        layout = self.layout(name)
        path = catalog.stored_model_path(self._ledger.conn, name)
        module_name, _, qualname = path.partition(":")
        try:
            import importlib

            model = importlib.import_module(module_name)
            for part in qualname.split("."):
                model = getattr(model, part)
        except (ImportError, AttributeError, ValueError) as exc:
            raise SchemaMismatchError(
                f"topic {name!r}: its model {path!r} cannot be imported ({exc}); pass the model explicitly") from exc
        return self.topic(name, model, dedup=layout.dedup or None).model

    def _bind(self, layout: TopicLayout, fingerprint: str) -> Topic:
        from ..ledger.topics import table_spec

        spec = table_spec(self._ledger.conn, layout.name)  # a keyed table opened as a topic merges too
        topic = Topic(self, layout, fingerprint) if spec is None else KeyedTable(self, layout, fingerprint, spec)
        self._topics[layout.name] = topic
        self._fingerprints[layout.name] = fingerprint
        return topic

    def opened(self, name: str) -> Topic | None:
        """The Topic (or Stream) ``name`` as this Source has it open, or None (nothing is read)."""
        return self._topics.get(name)

    def register_consumers(self, pairs) -> None:
        """Register (topic, consumer) pairs in one transaction, before any of them runs.

        Each new consumer starts at the earliest row (every row except rows handled for every
        consumer); existing ones keep their positions.

        Raises:
            TopicNotFoundError: a topic is not in the file.
        """
        now = utc_now()
        with self._ledger.atomic() as conn:
            for topic, consumer in pairs:
                self.layout(topic)
                acks.register_consumer_in_current_transaction(conn, topic, consumer, now)

    # -- streams (api/streams.py) -------------------------------------------------------
    def stream(self, name: str, max_age: Any = None):
        """Create or reopen a schemaless stream of JSON objects; ``stream.append(dict)``.

        Args:
            max_age: a retention (seconds, timedelta, or "7d"): rows every consumer has
                handled are deleted once older; None leaves the stored setting as it is.

        Raises:
            SchemaMismatchError: ``name`` is a typed topic.
        """
        from .modes import retention
        from .streams import JsonObject, Stream

        seconds = retention.max_age_seconds(max_age)
        existing = self._topics.get(name)
        if isinstance(existing, Stream):
            stream = existing
        else:
            topic = self.topic(name, JsonObject, dedup=None)
            stream = Stream(self, topic.layout, self._fingerprints[name])
            self._topics[name] = stream
        if seconds is not None:
            retention.set_retention(self.ledger, name, seconds)
            retention.apply_retention(self.ledger, [name])
        return stream

    def streaming(self, name: str, fn=None, **kwargs: Any):
        """Deliver windows of stream/topic ``name`` to a function (a decorator without ``fn``).

        Args:
            size: count windows of exactly N rows (a partial window waits).
            interval: time windows every ``interval`` seconds: all pending rows (relaxed,
                the default) or, with ``relaxed=False``, back-to-back fixed intervals of
                commit time (empty ones only with ``emit_empty=True``).
            emitter: a WindowEmitter subclass deciding windows itself.
            consumer: the consumer name (default: the function's name).
            workers: windows run in up to this many processes at once, started as windows need
                them (they still commit in order); at most ``util.procs.concurrency_limit()``.
            sink: a Topic (written in the window's commit) or an object with ``put(message)``.
            until_idle: return once no window is ready; blocking=False: run in a thread.
            forward_on_none: when the function returns None, send the window's rows themselves
                to the sink (minibatch's ``forward(window.data)``: a filter or a side effect
                that passes its input on). Off by default: None means "nothing to write".

        Returns:
            A StreamingConsumer (``.stop()``, ``.windows_committed``, ``.rows``).

        Raises:
            StreamingConfigError: inconsistent arguments (named in the message).
            WindowFailedError: with until_idle, a window kept failing (it stays open).
        """
        from .streams import streaming

        return streaming(self, name, fn, **kwargs)

    def apply_retention(self) -> dict[str, int]:
        """Delete handled rows older than each topic's max age now; returns {topic: deleted}."""
        from .modes.retention import apply_retention

        return apply_retention(self.ledger)


    def compact_tables(self, names: Sequence[str] | None = None) -> dict[str, int]:
        """Compact every keyed table (or those named): delete the superseded versions every
        consumer of the table has acked, one transaction per table (``KeyedTable.compact``).

        Returns:
            {table: versions deleted}.

        Raises:
            SchemaMismatchError: a name that is not a keyed table.
        """
        from ..ledger.consuming import compact_table_in_current_transaction
        from ..ledger.topics import keyed

        tables = keyed.table_names(self._ledger.conn)
        for name in names or ():
            if name not in tables:
                raise SchemaMismatchError(f"{name!r} is not a keyed table (tables: {tables!r})")
        deleted = {}
        for name in (tables if names is None else list(names)):
            with self._ledger.atomic() as conn:
                deleted[name] = compact_table_in_current_transaction(conn, catalog.read_layout(conn, name))
        return deleted

    def group(self, name: str, *, start: str = "earliest") -> ConsumerGroup:
        """The consumer group ``name``: fetch, commit, seek, lag, follow (see api/modes/groups.py).

        ``start``: where the group starts on a topic it has not read yet: "earliest" (every
        row, except rows handled for every consumer) or "latest" (rows appended from then on).

        Raises:
            InvalidNameError: not a valid consumer name.
            InvalidSettingError: ``start`` is not "earliest" or "latest".
        """
        return ConsumerGroup(self, name, start=start)

    def topics(self) -> list[str]:
        """Names of every topic stored in the file, sorted."""
        return catalog.topic_names(self._ledger.conn)

    def layout(self, name: str) -> TopicLayout:
        """The stored layout of a topic (no model class needed): for tools and the CLI.

        Raises:
            TopicNotFoundError: no such topic in the file.
        """
        return catalog.read_layout(self._ledger.conn, name, where=repr(self.path))

    # -- pipelines and runs --------------------------------------------------------
    def full_pipeline(self, *pipelines: Pipeline, batch_size: int = 1000) -> FullPipeline:
        """Compose arms (``topic.pipe(fn).to(target)``) into one DAG; call ``.run()``."""
        return FullPipeline(self, list(pipelines), batch_size=batch_size)

    def runs(self, *, stage: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """The run log, most recent first."""
        return read_runs(self._ledger.conn, stage=stage, limit=limit)

    def quarantined(self, topic: str | None = None, *, limit: int = 100) -> list[dict[str, Any]]:
        """Rows in the quarantine (dead-letter) table, most recent first."""
        return list_quarantined(self._ledger.conn, topic or None, limit=limit)

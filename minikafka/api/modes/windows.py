"""Windows over a topic and the emitters that decide them (minibatch's model, on the ledger).

A ``WindowEmitter`` decides the next window of a consumer from the rows still pending
for it: ``CountWindow`` (exactly ``size`` rows), ``FixedTimeWindow`` (back-to-back
half-open intervals of the ledger's commit time), ``RelaxedTimeWindow`` (every
``interval`` seconds, everything pending). A custom emitter subclasses
``WindowEmitter`` and overrides ``window_ready()`` and ``query()``.

Decisions run inside the transaction that stores the window, so they see one
consistent ledger; the function only ever sees stored windows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ...errors import StreamingConfigError
from ...ledger.consuming import StoredWindow
from ...ledger.consuming import windows as stored
from ...ledger.topics import TopicTable, acks
from ...util import clock
from ...util.clock import format_timestamp, parse_timestamp
from ..core.record import Record

if TYPE_CHECKING:
    from ..core.handles import TopicHandle


class Window:
    """The rows a streaming function gets, and where they sit in the stream.

    Attributes:
        id: the window's number for its consumer (1, 2, ...); a window offered again
            after a crash or an exception keeps its id and its rows.
        consumer: the consumer it belongs to.
        topic: the topic (or stream) name.
        kind: "count", "fixed", "relaxed" or "custom".
        start, end: the time range (fixed: the half-open interval; relaxed: the previous
            window's end to this window's decision; count/custom: the first and last
            row's commit time). Aware UTC datetimes, or None for an empty window.
        first_offset, last_offset: the lowest and highest row id in it (0 when empty).
        records: the rows as Records (id, created_at, data, ...), built on first use.
        data: the rows' payloads: model instances for a typed topic, dicts for a stream.
        attempts: how many times this window was offered before (0 the first time).
    """

    def __init__(self, id: int, consumer: str, topic: str, kind: str, start: datetime | None,
                 end: datetime | None, first_offset: int, last_offset: int, records: list[Record] | None = None,
                 attempts: int = 0, *, rows: list[tuple] | None = None, make_record=None, make_data=None):
        self.id = id
        self.consumer = consumer
        self.topic = topic
        self.kind = kind
        self.start = start
        self.end = end
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.attempts = attempts
        self._records = records
        self._data: list[Any] | None = None
        self._rows = rows
        self._make_record = make_record
        self._make_data = make_data

    @property
    def records(self) -> list[Record]:
        if self._records is None:
            self._records = [self._make_record(r) for r in self._rows or ()]
        return self._records

    @property
    def data(self) -> list[Any]:
        if self._data is None:
            if self._records is None and self._make_data is not None:
                self._data = list(map(self._make_data, self._rows or ()))
            else:
                self._data = [r.data for r in self.records]
        return self._data

    def __len__(self) -> int:
        return len(self._rows) if self._records is None and self._rows is not None else len(self.records)

    def __repr__(self) -> str:
        return (f"Window(id={self.id}, consumer={self.consumer!r}, kind={self.kind!r}, rows={len(self)}, "
                f"offsets={self.first_offset}..{self.last_offset})")

    def __getstate__(self) -> dict:
        return {"id": self.id, "consumer": self.consumer, "topic": self.topic, "kind": self.kind,
                "start": self.start, "end": self.end, "first_offset": self.first_offset,
                "last_offset": self.last_offset, "attempts": self.attempts,
                "_records": [_detached(r) for r in self.records], "_data": None, "_rows": None,
                "_make_record": None, "_make_data": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


def _detached(record: Record) -> Record:
    if record._topic is None:
        return record
    return Record(record.id, record.topic, record.created_at, record.handled_at, record.status, record.data,
                  record.parent_id, record.parent_topic, record.run_id, record.consumer, None)


@dataclass
class WindowPlan:
    """What an emitter decided: a row range (or explicit ids) and a time range."""

    first_offset: int
    last_offset: int
    rows: int
    start: str | None = None
    end: str | None = None
    row_ids: list[int] | None = None


class DecisionContext:
    """What an emitter sees while deciding: the ledger inside the deciding transaction."""

    def __init__(self, topic: TopicHandle, consumer: str, consumer_id: int, floor: int, last: StoredWindow | None):
        self.topic = topic
        self.consumer = consumer
        self.consumer_id = consumer_id
        self.floor = floor  # rows at or below it are in open windows already
        self.last = last  # the consumer's latest window (open or committed), or None
        self.conn = topic.rows.ledger.conn
        self.table = topic.layout.table
        self.topic_table = TopicTable(self.conn, topic.layout)
        self.pending_sql, self.pending_params = acks.pending_filter(consumer_id)

    def span(self, created_before: str | None = None) -> tuple[int | None, int | None, int, str | None]:
        """(lowest id, highest id, rows, earliest ``_created_at``) of the rows pending past the floor
        (only those created before ``created_before``)."""
        return stored.pending_span(self.topic_table, self.consumer_id, self.floor, created_before=created_before)

    def nth(self, n: int) -> tuple[int, str] | None:
        """(id, ``_created_at``) of the ``n``-th row pending past the floor (1: the first), or None."""
        return stored.nth_pending(self.topic_table, self.consumer_id, self.floor, n)


class WindowEmitter:
    """Decides a consumer's windows. Subclass it and override ``window_ready`` and ``query``.

    ``window_ready()`` returns ``(ready, args)`` (or just a bool); when ready,
    ``query(*args)`` returns the window's rows (Records from ``self.pending()``, or their
    ids). The chosen rows are stored as the window before the function sees them.

    Attributes:
        topic: the Topic (or Stream) consumed.
        consumer: the consumer name.
        size, interval: what ``streaming()`` was given (may be None).
        emit_empty: whether empty windows are offered.
    """

    kind = "custom"

    def __init__(self, topic: TopicHandle, consumer: str, *, size: int | None = None, interval: float | None = None,
                 emit_empty: bool = False, **options: Any):
        self.topic = topic
        self.consumer = consumer
        self.size = size
        self.interval = interval
        self.emit_empty = emit_empty
        self.options = options
        self._ctx: DecisionContext | None = None

    # -- for subclasses ------------------------------------------------------------------
    def now(self) -> datetime:
        """The current time (the injected clock in tests)."""
        return clock.now()

    def pending(self, limit: int | None = None) -> list[Record]:
        """Rows pending for this consumer and not in an open window, oldest first."""
        ctx = self._context()
        topic = self.topic
        rows = ctx.topic_table.page(ctx.floor, -1 if limit is None else int(limit), ctx.pending_sql, ctx.pending_params)
        return [topic.rows.record(r, self.consumer, "new") for r in rows]

    def window_ready(self) -> tuple[bool, tuple] | bool:
        """Is a window ready? Returns ``(ready, args for query)``."""
        raise NotImplementedError(f"{type(self).__name__} must override window_ready()")

    def query(self, *args: Any) -> list[Record] | list[int]:
        """The rows of the window ``window_ready`` found (Records or row ids)."""
        raise NotImplementedError(f"{type(self).__name__} must override query()")

    # -- used by the streaming loop -------------------------------------------------------
    def _context(self) -> DecisionContext:
        if self._ctx is None:
            raise RuntimeError("pending() is only available while a window is being decided")
        return self._ctx

    def plan(self, ctx: DecisionContext) -> WindowPlan | None:
        """Decide the next window (inside the deciding transaction), or None."""
        self._ctx = ctx
        try:
            ready = self.window_ready()
            args: tuple = ()
            if isinstance(ready, tuple):
                ready, args = ready[0], tuple(ready[1]) if len(ready) > 1 and ready[1] is not None else ()
            if not ready:
                return None
            chosen = self.query(*args)
        finally:
            self._ctx = None
        ids = sorted({r.id if isinstance(r, Record) else int(r) for r in (chosen or [])})
        if not ids and not self.emit_empty:
            return None
        now = format_timestamp(self.now())
        return WindowPlan(ids[0] if ids else 0, ids[-1] if ids else 0, len(ids), now, now, ids)


class CountWindow(WindowEmitter):
    """Exactly ``size`` rows per window, in offset order; a partial window waits."""

    kind = "count"

    def plan(self, ctx: DecisionContext) -> WindowPlan | None:
        row = ctx.nth(int(self.size))
        if row is None:
            return None
        first = ctx.nth(1)
        return WindowPlan(first[0], row[0], int(self.size), first[1], row[1])


class RelaxedTimeWindow(WindowEmitter):
    """Every ``interval`` seconds, one window of every row pending at that moment."""

    kind = "relaxed"

    def plan(self, ctx: DecisionContext) -> WindowPlan | None:
        lo, hi, n, earliest = ctx.span()
        start = ctx.last.end if ctx.last is not None and ctx.last.end else earliest
        if start is None:
            return None
        now = self.now()
        if now < parse_timestamp(start) + timedelta(seconds=self.interval):
            return None
        if not n and not self.emit_empty:
            return None
        return WindowPlan(lo or 0, hi or 0, n, start, format_timestamp(now))


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class FixedTimeWindow(WindowEmitter):
    """Back-to-back half-open intervals ``[start, start + interval)`` of commit time.

    Intervals are aligned to multiples of ``interval`` since the epoch. A window is
    decided once its interval has ended, and keeps its interval if its function fails.
    Empty intervals are offered only with ``emit_empty=True``. Rows replayed after their
    interval was decided go into the next window.
    """

    kind = "fixed"

    def _floor(self, when: datetime) -> datetime:
        seconds = (when - EPOCH).total_seconds()
        return EPOCH + timedelta(seconds=math.floor(seconds / self.interval) * self.interval)

    def plan(self, ctx: DecisionContext) -> WindowPlan | None:
        earliest = ctx.span()[3]
        previous_end = parse_timestamp(ctx.last.end) if ctx.last is not None and ctx.last.end else None
        now = self.now()
        if self.emit_empty:
            interval = timedelta(seconds=self.interval)
            start = previous_end or (self._floor(parse_timestamp(earliest)) if earliest else self._floor(now) - interval)
        elif earliest is None:
            return None
        else:
            start = self._floor(parse_timestamp(earliest))
            if previous_end is not None and previous_end > start:
                start = previous_end
        end = start + timedelta(seconds=self.interval)
        if now < end:
            return None
        end_text = format_timestamp(end)
        lo, hi, n, _ = ctx.span(created_before=end_text)
        if not n and not self.emit_empty:
            return None
        return WindowPlan(lo or 0, hi or 0, n, format_timestamp(start), end_text)


def check_emitter_arguments(*, size: Any, interval: Any, emitter: Any, options: dict[str, Any]) -> None:
    """Check what ``streaming()`` says about its windows, before anything is opened or created.

    Raises:
        StreamingConfigError: size and interval both missing or both given, a size that
            is not a positive integer, an interval that is not a positive number, an
            emitter that is not a WindowEmitter, or an unknown argument.
    """
    if emitter is not None:
        if not isinstance(emitter, WindowEmitter) and not (
                isinstance(emitter, type) and issubclass(emitter, WindowEmitter)):
            raise StreamingConfigError(
                f"emitter= must be a subclass of minikafka.WindowEmitter, got {emitter!r}")
        if isinstance(emitter, WindowEmitter):
            return
        if size is not None:
            _check_size(size)
        if interval is not None:
            _check_interval(interval)
        return
    if size is None and interval is None:
        raise StreamingConfigError("streaming() needs size=N (count windows) or interval=seconds (time windows)")
    if size is not None and interval is not None:
        raise StreamingConfigError(
            f"streaming() takes size= or interval=, not both (got size={size!r}, interval={interval!r})")
    if options:
        raise StreamingConfigError(f"unknown streaming() argument(s): {sorted(options)}")
    if size is not None:
        _check_size(size)
    else:
        _check_interval(interval)


def make_emitter(topic: TopicHandle, consumer: str, *, size: int | None, interval: float | None, relaxed: bool,
                 emitter: Any, emit_empty: bool, options: dict[str, Any]) -> WindowEmitter:
    """The emitter ``streaming()``'s arguments describe.

    Raises:
        StreamingConfigError: see ``check_emitter_arguments``.
    """
    check_emitter_arguments(size=size, interval=interval, emitter=emitter, options=options)
    if emitter is not None:
        if isinstance(emitter, WindowEmitter):
            return emitter
        return emitter(topic, consumer, size=size, interval=interval, emit_empty=emit_empty, **options)
    if size is not None:
        return CountWindow(topic, consumer, size=size, emit_empty=emit_empty)
    cls = RelaxedTimeWindow if relaxed else FixedTimeWindow
    return cls(topic, consumer, interval=float(interval), emit_empty=emit_empty)


def _check_size(size: Any) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise StreamingConfigError(f"size must be a positive integer (rows per window), got {size!r}")


MAX_INTERVAL = 10 * 365.25 * 24 * 3600  # ten years: a window's end must stay a datetime (year 9999 at most)


def _check_interval(interval: Any) -> None:
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 < interval <= MAX_INTERVAL:
        raise StreamingConfigError(
            f"interval must be a positive number of seconds, at most {MAX_INTERVAL:.0f} (ten years), got {interval!r}")

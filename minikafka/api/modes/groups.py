"""Consumer groups: a named consumer that fetches batches per partition and commits offsets.

``group = source.group("order-processors")`` is the same consumer as a Spark stage or a
pipe consuming under that name (``topic.consumers()`` lists it): the ack model of
``ledger/topics/acks.py`` is shared, so a commit here, a per-row ``record.ack()`` and a stage's
commit all move the same committed offset.

- ``fetch`` returns the oldest rows above the committed offset (skipping rows this group
  acked out of order or that are handled for everyone) and never moves anything.
- ``commit`` is monotonic (a lower offset is a no-op returning False) and costs the
  same whatever it covers; ``seek`` is the explicit way back (or forward).
- ``follow`` yields batches as they come, polling while idle.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from ...errors import InvalidOffsetError, InvalidSettingError, TopicNotFoundError
from ...ledger.consuming import N_FETCH_META
from ...ledger.consuming import groups as group_rows
from ...ledger.topics import TopicLayout, acks, catalog, validate_consumer_name
from ...ledger.transactions import Pause, pause, pause_async
from ...util.clock import parse_timestamp, utc_now
from ...util.timeouts import check_timeout
from ..core.record import Record

if TYPE_CHECKING:
    from ..core.handles import SourceHandle, TopicHandle
    from ..core.transaction import Transaction

POLL_SECONDS = 0.1


def check_offset(offset: object, what: str = "offset") -> int:
    """``offset`` if it is a non-negative integer (bools refused).

    Raises:
        InvalidOffsetError: anything else, named in the message.
    """
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise InvalidOffsetError(f"{what} must be a non-negative integer, got {offset!r} ({type(offset).__name__})")
    if offset < 0:
        raise InvalidOffsetError(f"{what} must be a non-negative integer, got {offset!r}")
    return offset


def _field_dicts(layout: TopicLayout, rows: list[tuple]) -> list[dict]:
    names, start = layout.field_names, N_FETCH_META
    end = start + len(names)
    dicts = [dict(zip(names, r[start:end])) for r in rows]
    steps = [(c.name, c.decode) for c in layout.columns if c.decode]
    if steps:
        for d in dicts:
            for field_name, decode in steps:
                v = d[field_name]
                if v is not None:
                    d[field_name] = decode(v)
    return dicts


@functools.cache
def _record_maker() -> Callable[[dict], Record]:
    """Build Records from complete field dicts without the keyword-argument call (hot path of fetch)."""
    fields = dataclasses.fields(Record)
    if hasattr(Record, "__post_init__") or any(f.default_factory is not dataclasses.MISSING for f in fields):
        return lambda values: Record(**values)
    new = object.__new__

    def make(values: dict) -> Record:
        record = new(Record)
        record.__dict__ = values  # every field is in ``values``; the dict is the record's own
        return record

    return make


class ConsumerGroup:
    """A named consumer reading topics partition by partition with committed offsets.

    Get one from ``source.group(name)``; it is cheap (no write until it fetches or
    commits). Groups are independent of each other; a new Source on the same file
    resumes every group from its last commit.
    """

    def __init__(self, source: SourceHandle, name: str, *, start: str = "earliest"):
        validate_consumer_name(name)
        self.source = source
        self.name = name
        self.start = acks.check_start(start)  # where it starts on a topic it has not read yet

    def __repr__(self) -> str:
        return f"ConsumerGroup({self.name!r})"

    # -- plumbing ---------------------------------------------------------------------
    def _topic_name(self, topic: TopicHandle | str) -> str:
        return topic if isinstance(topic, str) else topic.name

    def _layout(self, topic: TopicHandle | str) -> TopicLayout | None:
        """The stored layout, or None when the topic does not exist (yet)."""
        name = self._topic_name(topic)
        opened = self.source.opened(name)
        if opened is not None:
            return opened.layout
        row = catalog.catalog_row(self.source.ledger.conn, name)
        return None if row is None else catalog.layout_of_row(row)

    def _require_layout(self, topic: TopicHandle | str) -> TopicLayout:
        layout = self._layout(topic)
        if layout is None:
            name = self._topic_name(topic)
            raise TopicNotFoundError(
                f"group {self.name!r}: no topic {name!r} in {self.source.path!r} (topics: {self.source.topics()!r})")
        return layout

    def _open_topic(self, topic: TopicHandle | str) -> TopicHandle:
        if not isinstance(topic, str):
            return topic
        opened = self.source.opened(topic)
        if opened is not None:
            return opened
        self.source.model_of(topic)  # imports the model the catalog names, binds the topic
        opened = self.source.opened(topic)
        assert opened is not None
        return opened

    def _consumer_id(self, topic: str, *, register: bool) -> int | None:
        ledger = self.source.ledger
        found = acks.find_consumer(ledger.conn, topic, self.name)
        if found is not None or not register:
            return found
        with ledger.atomic() as conn:
            return acks.register_group_in_current_transaction(conn, topic, self.name, utc_now(), start=self.start)

    def _check_offset_exists(self, layout: TopicLayout, partition: int, offset: int) -> None:
        if offset == 0:
            return
        last = group_rows.last_offset(self.source.ledger.conn, layout, partition)
        if offset > last:
            raise InvalidOffsetError(
                f"group {self.name!r}: offset {offset} is beyond the last offset ({last}) of topic "
                f"{layout.name!r} partition {partition}; nothing was committed")

    # -- reading ------------------------------------------------------------------------
    def fetch(self, topic: TopicHandle | str, partition: int = 0, max_messages: int = 100) -> list[Record]:
        """The oldest rows of ``partition`` above this group's committed offset, oldest first.

        Fetching never advances anything: without a commit, the next fetch returns the
        same rows. The group is registered on the topic at its first fetch or commit,
        starting at its ``start`` ("earliest": the beginning of the log, offset 0).

        Args:
            topic: a Topic or a topic name (its model is imported from the catalog).
            partition: the partition to read.
            max_messages: at most this many records.

        Returns:
            Records with ``partition`` and ``offset``; ``[]`` when the topic does not exist.

        Raises:
            PartitionOutOfRangeError: no such partition.
            ValueError: max_messages < 1.
        """
        return self._fetch(topic, partition, max_messages)

    def _fetch(self, topic: TopicHandle | str, partition: int, max_messages: int, after: int = 0) -> list[Record]:
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
            raise InvalidSettingError(f"max_messages must be an integer >= 1, got {max_messages!r}")
        layout = self._layout(topic)
        if layout is None:
            return []
        layout.check_partition(partition)
        rows, cid = self._fetch_rows(layout, partition, max_messages, after)
        if not rows:
            return []
        return self._records(self._open_topic(topic), rows, partition)

    def _fetch_rows(self, layout: TopicLayout, partition: int, limit: int, after: int = 0) -> tuple[list[tuple], int]:
        """Rows (``FETCH_META`` then the fields) pending for this group in one partition; registers the group."""
        cid = self._consumer_id(layout.name, register=True)
        conn = self.source.ledger.conn
        start = max(acks.committed_offset(conn, cid, partition), after)
        cache = self.__dict__.setdefault("_sql", {})
        return group_rows.pending_rows(conn, layout, cid, partition, start, limit, cache), cid

    def _records(self, topic: TopicHandle, rows: list[tuple], partition: int) -> list[Record]:
        """Records of ``_fetch_rows`` rows (``_id, _created_at, lineage..., fields``)."""
        rows_of_topic = topic.rows
        models = rows_of_topic.validate_many(_field_dicts(topic.layout, rows))
        make = _record_maker()
        name, group = topic.name, self.name
        stamps: dict[str, Any] = {}  # rows appended together share one timestamp text
        out = []
        for r, m in zip(rows, models):
            created = stamps.get(r[1])
            if created is None:
                created = stamps[r[1]] = parse_timestamp(r[1])
            out.append(make({"id": r[0], "topic": name, "created_at": created, "handled_at": None, "status": "new",
                             "data": m, "parent_id": r[2], "parent_topic": r[3], "run_id": r[4],
                             "consumer": group, "partition": partition, "_topic": rows_of_topic}))
        return out

    def committed(self, topic: TopicHandle | str, partition: int = 0) -> int:
        """This group's committed offset in ``partition`` (0 when never committed or no such topic).

        Raises:
            PartitionOutOfRangeError: no such partition.
        """
        layout = self._layout(topic)
        if layout is None:
            return 0
        layout.check_partition(partition)
        cid = self._consumer_id(layout.name, register=False)
        if cid is None:
            return 0
        return acks.committed_offset(self.source.ledger.conn, cid, partition)

    def lag(self, topic: TopicHandle | str) -> dict[int, int]:
        """{partition: rows pending for this group} ({} when the topic does not exist)."""
        layout = self._layout(topic)
        if layout is None:
            return {}
        cid = self._consumer_id(layout.name, register=False)
        return acks.lag(self.source.ledger.conn, layout.name, cid, start=self.start)

    # -- moving ---------------------------------------------------------------------------
    def commit(self, topic: TopicHandle | str, partition: int, offset: int, tx: Transaction | None = None) -> bool:
        """Everything up to and including ``offset`` in ``partition`` is done for this group.

        Monotonic: an offset at or below the committed one changes nothing and returns
        False (use ``seek`` to go back). The cost does not depend on how many rows the
        offset covers. Durability: a commit survives a crash of the process; a power cut
        may undo the last commits (their rows are fetched again: at-least-once), so a
        standalone commit skips the fsync. With ``tx`` it is as durable as the transaction.

        Args:
            tx: a transaction from ``source.transaction()`` to join, so the commit lands
                with the caller's own writes (and is as durable) or not at all.

        Returns:
            True when the committed offset moved.

        Raises:
            TopicNotFoundError: no such topic.
            PartitionOutOfRangeError: no such partition.
            InvalidOffsetError: not a non-negative integer, or beyond the partition's last offset.
            TransactionError: ``tx`` is closed or belongs to another Source.
        """
        from ..core.transaction import joined

        layout = self._require_layout(topic)
        layout.check_partition(partition)
        check_offset(offset)
        self._check_offset_exists(layout, partition, offset)
        ledger = self.source.ledger
        with ledger.relaxed_sync(), joined(self.source, tx) as conn:
            now = utc_now()
            cid = acks.register_group_in_current_transaction(conn, layout.name, self.name, now, start=self.start)
            return acks.commit_offset_in_current_transaction(conn, layout.name, cid, partition, offset, now)

    def seek(self, topic: TopicHandle | str, partition: int, offset: int) -> None:
        """Set this group's offset in ``partition`` to exactly ``offset`` (back or forward).

        Rows above it are pending again for this group only; other groups keep theirs.

        Raises:
            TopicNotFoundError, PartitionOutOfRangeError, InvalidOffsetError: as for ``commit``.
        """
        layout = self._require_layout(topic)
        layout.check_partition(partition)
        check_offset(offset)
        self._check_offset_exists(layout, partition, offset)
        with self.source.ledger.atomic() as conn:
            now = utc_now()
            cid = acks.register_group_in_current_transaction(conn, layout.name, self.name, now, start=self.start)
            acks.seek_in_current_transaction(conn, layout.name, cid, partition, offset, now)

    # -- following ------------------------------------------------------------------------
    def follow(self, topic: TopicHandle | str, partitions: list[int] | None = None, max_messages: int = 100,
               timeout: float | None = None, *, poll: float = POLL_SECONDS,
               sleep: Callable[[float], None] | None = None,
               clock: Callable[[], float] = time.monotonic) -> Iterator[list[Record]]:
        """Batches of pending rows (one partition each), then new ones as they arrive.

        Each row is yielded once per ``follow`` (it remembers what it yielded; commit to
        make progress durable). While nothing is pending it sleeps on the Source's
        watcher, which wakes it on a commit by any process (an in-memory Source, or an
        injected ``sleep``, polls every ``poll`` seconds instead).

        Args:
            partitions: the partitions to follow (default: all of the topic's).
            timeout: stop after this many seconds without new rows (None: never).

        Raises:
            PartitionOutOfRangeError: a partition the topic does not have.
            InvalidSettingError: (a ValueError) a timeout or poll that is not a finite number >= 0.
        """
        steps = self._follow_steps(topic, partitions, max_messages, timeout, poll, clock,
                                   watched=sleep is None)
        return self._follow(steps, sleep or time.sleep)

    def _follow(self, steps: Iterator[list[Record] | Pause], sleep: Callable[[float], None]) -> Iterator[list[Record]]:
        watcher = self.source.watcher
        for step in steps:
            if isinstance(step, Pause):
                pause(watcher, step, sleep)
            else:
                yield step

    async def follow_async(self, topic: TopicHandle | str, partitions: list[int] | None = None,
                           max_messages: int = 100, timeout: float | None = None, *,
                           poll: float = POLL_SECONDS) -> AsyncIterator[list[Record]]:
        """``follow`` for asyncio: ``async for batch in group.follow_async(topic)``; between
        batches it awaits the watcher without blocking the event loop (an in-memory Source
        awaits ``poll`` seconds instead). The same checks and loop as ``follow``.

        Raises:
            InvalidSettingError: (a ValueError) a timeout or poll that is not a finite number >= 0.
        """
        watcher = self.source.watcher
        for step in self._follow_steps(topic, partitions, max_messages, timeout, poll, time.monotonic,
                                       watched=True):
            if isinstance(step, Pause):
                await pause_async(watcher, step)
            else:
                yield step

    def _follow_steps(self, topic: TopicHandle | str, partitions: list[int] | None, max_messages: int,
                      timeout: float | None, poll: float, clock: Callable[[], float], *,
                      watched: bool) -> Iterator[list[Record] | Pause]:
        """The one loop of ``follow`` and ``follow_async``: a batch to hand out, or a ``Pause``.

        Its arguments are checked here, before the first step: a NaN timeout would otherwise
        never end the wait. ``watched`` False (an injected sleep) pauses ``poll`` seconds at most.
        """
        timeout = check_timeout(timeout, "follow timeout")
        poll = check_timeout(poll, "poll", none=False, positive=True)
        watched = watched and self.source.path != ":memory:"
        return self._follow_loop(topic, partitions, max_messages, timeout, poll, clock, watched)

    def _follow_loop(self, topic: TopicHandle | str, partitions: list[int] | None, max_messages: int,
                     timeout: float | None, poll: float, clock: Callable[[], float],
                     watched: bool) -> Iterator[list[Record] | Pause]:
        watcher = self.source.watcher if watched else None
        positions: dict[int, int] = {}
        idle_since = clock()
        while True:
            mark = watcher.mark() if watcher is not None else None  # before reading: a commit after it wakes us
            layout = self._layout(topic)
            got = False
            if layout is not None:
                parts = list(range(layout.partitions)) if partitions is None else list(partitions)
                for p in parts:
                    batch = self._fetch(topic, p, max_messages, after=positions.get(p, 0))
                    if batch:
                        positions[p] = batch[-1].offset
                        got = True
                        yield batch
            now = clock()
            if got:
                idle_since = now
                continue
            if timeout is not None and now - idle_since >= timeout:
                return
            remaining = None if timeout is None else max(0.0, timeout - (now - idle_since))
            if mark is None:
                remaining = poll if remaining is None else min(poll, remaining)
            yield Pause(mark, remaining)

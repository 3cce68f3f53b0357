"""Periodic jobs: schedules that enqueue a payload into a queue on a cron expression or every N seconds.

A schedule is a row in the ledger (``ledger.consuming.schedules``): its queue, ``cron`` (five-field,
UTC; needs ``croniter``: ``pip install 'minikafka[schedules]'``) or ``every`` (seconds), the
payload, ``max_catch_up`` and its next due time. ``Scheduler.tick()`` fires what is due: in
one ``BEGIN IMMEDIATE`` transaction it takes (or renews) the ledger's leader lease
``scheduler`` (an expiring row; a process that dies loses it when it expires), inserts one
row per (schedule, due time) into the fires table, whose primary key refuses a due time
that already fired, enqueues the job (``run_at`` = its due time) and moves the schedule's
next due time past now. So a due time fires once, however many processes tick.

After downtime only the latest ``max_catch_up`` missed due times fire (default 1: one run
for all that was missed); older ones are skipped. A paused schedule fires nothing; on
resume its next due time is the first one after now.

One schedule's failure never stops the others: each schedule fires in its own savepoint,
and a fire that fails (its payload no longer fits the model, its dedup key is already
stored) is rolled back alone, recorded as skipped (a fire row without a job, the error in
``ScheduleInfo.last_error``), and the schedule's clock moves on. A schedule whose queue was
dropped (``topic.drop_consumer``) fires nothing and says so (``queue_dropped``): a tick
never registers the consumer again, which would start it at the earliest row and run every
job done before the drop a second time. Opening the queue again (``source.queue``,
``topic.queue``) is the user's choice, and the schedule fires again from then on.

Adding refuses what could only fail: a cron expression other than five fields, and a queue
whose topic has dedup fields (the payload is the same at every fire). Adding a schedule
identical to the stored one changes nothing (its clock keeps running).

Crash contract: the fire row, the job and the schedule's next due time commit together;
a skipped fire's row, its error and the next due time commit together.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ...errors import (
    InvalidSettingError,
    LedgerError,
    QueueNotFoundError,
    ScheduleConfigError,
    ScheduleNotFoundError,
    SourceClosedError,
    WrongThreadError,
)
from ...ledger.consuming import queues as queue_store
from ...ledger.consuming import schedules as store
from ...util.clock import format_timestamp
from ...util.millis import duration_ms
from ...util.optional import require

if TYPE_CHECKING:
    from ..core.handles import SourceHandle

Queue = Any  # a modes.queues.Queue (not imported: queues imports this module for q.schedule)

__all__ = ["DEFAULT_LEASE", "Fired", "Lease", "ScheduleInfo", "ScheduleNotFoundError", "Scheduler", "Skipped"]

LEASE_NAME = "scheduler"
DEFAULT_LEASE = 30.0
FIRES_KEPT_MS = 7 * 24 * 3600 * 1000
CRON_FIELDS = 5
MAX_CATCH_UP = 1000  # the due times one tick may fire for one schedule (each one a job)

log = logging.getLogger("minikafka.schedules")
# what a tick must not swallow: the ledger itself cannot be used (locked, closed, disk full)
_FATAL = (LedgerError, SourceClosedError, WrongThreadError, sqlite3.OperationalError)


@dataclass(frozen=True)
class Fired:
    """One due time fired by a tick: the schedule, the due time (UTC) and the job enqueued."""

    schedule: str
    due: datetime
    job_id: int


@dataclass(frozen=True)
class Skipped:
    """One due time a tick could not fire: the schedule, the due time (UTC) and why (one line)."""

    schedule: str
    due: datetime
    error: str


@dataclass(frozen=True)
class Lease:
    """Who holds the scheduler's leader lease, and until when (UTC)."""

    holder: str
    expires_at: datetime


@dataclass
class ScheduleInfo:
    """A schedule as stored: ``queue_dropped`` when its queue is gone (it fires nothing),
    ``last_error``/``last_error_at``/``skipped`` when fires failed (how many were skipped)."""

    name: str
    queue: str
    cron: str | None
    every: float | None
    payload: Any
    priority: int
    max_catch_up: int
    paused: bool
    next_due: datetime
    last_fired: datetime | None
    queue_dropped: bool = False
    last_error: str | None = None
    last_error_at: datetime | None = None
    skipped: int = 0

    def asdict(self) -> dict[str, Any]:
        return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in self.__dict__.items()}


def _dt(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _croniter():
    return require("croniter", "schedules").croniter


def check_cron(expr: str) -> str:
    """``expr`` when it is a five-field cron expression (minute hour day month weekday).

    Raises:
        ScheduleConfigError: (a ValueError) not a string, not five fields (croniter would read
            a sixth as seconds: ``0 0 3 * * *`` would fire every second of a minute), or
            not a cron expression.
    """
    what = "cron must be a cron expression of five fields (minute hour day month weekday, UTC) such as '*/5 * * * *'"
    if not isinstance(expr, str):
        raise ScheduleConfigError(f"{what}, got {expr!r}")
    fields = len(expr.split())
    if fields != CRON_FIELDS:
        raise ScheduleConfigError(f"{what}, got {fields} fields: {expr!r}")
    if not _croniter().is_valid(expr):
        raise ScheduleConfigError(f"{what}, got {expr!r}")
    return expr


def cron_next(expr: str, after_ms: int) -> int:
    """The first due time of ``expr`` strictly after ``after_ms`` (UTC)."""
    it = _croniter()(expr, _dt(after_ms))
    return int(round(it.get_next(float) * 1000))


def cron_latest(expr: str, upto_ms: int, since_ms: int, n: int) -> list[int]:
    """The latest ``n`` due times of ``expr`` in ``[since_ms, upto_ms]``, oldest first."""
    it = _croniter()(expr, _dt(upto_ms + 1))
    out: list[int] = []
    while len(out) < n:
        t = int(round(it.get_prev(float) * 1000))
        if t < since_ms:
            break
        out.append(t)
    return out[::-1]


class Scheduler:
    """Fires the ledger's schedules (see the module docstring).

    Args:
        source: the Source (one per thread).
        clock: epoch seconds (tests inject one); the system clock by default.
        holder: this process's name for the leader lease (default host:pid:random).
        lease: seconds the leader lease lasts without a tick renewing it.
    """

    def __init__(self, source: SourceHandle, *, clock: Callable[[], float] | None = None,
                 holder: str | None = None, lease: float = DEFAULT_LEASE):
        self.lease_ms = duration_ms(lease, "lease")
        self.source = source
        self.clock = clock or time.time
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._queues: dict[tuple[str, str], Queue] = {}
        self.skipped: list[Skipped] = []  # what the last tick could not fire

    def _now(self) -> int:
        return int(round(self.clock() * 1000))

    # -- defining ---------------------------------------------------------------
    def add(self, queue: Queue, name: str, *, cron: str | None = None, every: float | None = None,
            payload: BaseModel | dict[str, Any] | None = None, priority: int = 0,
            max_catch_up: int = 1) -> ScheduleInfo:
        """Create or replace the schedule ``name`` enqueueing ``payload`` into ``queue``.

        Adding a schedule identical to the stored one (same queue, timing, payload, priority and
        catch-up) changes nothing: its clock keeps running. Another definition replaces it, and
        its clock starts now.

        Raises:
            InvalidSettingError: (a ValueError) not exactly one of cron/every, an empty name,
                max_catch_up not an integer from 1 to 1000, priority not a 64-bit integer.
            InvalidDurationError: (a ValueError) every not a finite number of seconds > 0.
            ScheduleConfigError: (a ValueError) a cron expression that is not five fields or
                not valid; a queue whose topic has dedup fields (every fire after the first
                would repeat the payload's key).
            QueueNotFoundError: the queue was dropped.
            pydantic.ValidationError: the payload does not fit the queue's model.
            MissingDependencyError: cron= without croniter installed.
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidSettingError(f"a schedule name must be a non-empty string, got {name!r}")
        if (cron is None) == (every is None):
            raise InvalidSettingError("give exactly one of cron= (a cron expression) or every= (seconds)")
        every_ms = None if every is None else duration_ms(every, "every")
        if cron is not None:
            check_cron(cron)
        if (isinstance(max_catch_up, bool) or not isinstance(max_catch_up, int)
                or not 1 <= max_catch_up <= MAX_CATCH_UP):
            raise InvalidSettingError(f"max_catch_up must be an integer from 1 to {MAX_CATCH_UP}, got {max_catch_up!r}")
        if isinstance(priority, bool) or not isinstance(priority, int) or not -2**63 <= priority < 2**63:
            raise InvalidSettingError(f"priority must be a 64-bit integer, got {priority!r}")
        dedup = tuple(queue.topic.layout.dedup or ())
        if dedup:
            raise ScheduleConfigError(
                f"schedule {name!r}: queue {queue.name!r} has dedup fields {dedup!r}, and a schedule enqueues "
                "the same payload at every fire, so every fire after the first would be refused as a duplicate; "
                "schedule onto a queue without dedup fields")
        model = queue.rows.validate(payload if payload is not None else {})
        definition = {"topic": queue.topic.name, "consumer": queue.consumer, "cron": cron, "every_ms": every_ms,
                      "payload": model.model_dump_json(), "priority": priority, "max_catch_up": max_catch_up}
        with self.source.ledger.atomic() as conn:
            if not store.queue_exists(conn, queue.topic.name, queue.consumer):
                raise QueueNotFoundError(f"queue {queue.name!r} was dropped (its consumer was unregistered): "
                                         f"open it again before scheduling onto it")
            stored = store.get(conn, name)
            if stored is None or any(stored[k] != v for k, v in definition.items()):
                now = self._now()
                next_due = cron_next(cron, now) if cron is not None else now + every_ms
                store.save_in_current_transaction(conn, {
                    "name": name, **definition, "paused": 0, "next_due": next_due, "last_fired": None,
                    "created_at": format_timestamp(_dt(now))})
        return self.get(name)

    def get(self, name: str) -> ScheduleInfo:
        conn = self.source.ledger.conn
        row = store.get(conn, name)
        if row is None:
            raise ScheduleNotFoundError(f"no schedule named {name!r} in {self.source.path!r}")
        return _info(conn, row, store.errors(conn))

    def list(self) -> list[ScheduleInfo]:
        """Every schedule, by name."""
        conn = self.source.ledger.conn
        failures = store.errors(conn)
        return [_info(conn, r, failures) for r in store.all_schedules(conn)]

    def pause(self, name: str) -> None:
        """Stop firing ``name`` (nothing is enqueued until ``resume``)."""
        with self.source.ledger.atomic() as conn:
            if not store.set_paused_in_current_transaction(conn, name, True):
                raise ScheduleNotFoundError(f"no schedule named {name!r} in {self.source.path!r}")

    def resume(self, name: str) -> None:
        """Fire ``name`` again, from its first due time after now (what was missed while paused is skipped)."""
        with self.source.ledger.atomic() as conn:
            row = store.get(conn, name)
            if row is None:
                raise ScheduleNotFoundError(f"no schedule named {name!r} in {self.source.path!r}")
            now = self._now()
            nxt = cron_next(row["cron"], now) if row["cron"] else now + row["every_ms"]
            store.set_paused_in_current_transaction(conn, name, False, nxt)

    def remove(self, name: str) -> None:
        with self.source.ledger.atomic() as conn:
            if not store.remove_in_current_transaction(conn, name):
                raise ScheduleNotFoundError(f"no schedule named {name!r} in {self.source.path!r}")

    # -- firing -----------------------------------------------------------------
    def is_leader(self) -> bool:
        return store.lease_holder(self.source.ledger.conn, LEASE_NAME, self._now()) == self.holder

    def lease(self) -> Lease | None:
        """Who holds the leader lease now and until when (None when nobody does)."""
        row = store.lease(self.source.ledger.conn, LEASE_NAME, self._now())
        return None if row is None else Lease(row[0], _dt(row[1]))

    def tick(self) -> list[Fired]:
        """Fire every due time that has come, if this scheduler holds (or can take) the leader lease.

        A schedule that cannot fire (see the module docstring) is skipped alone: its skip is
        recorded, logged (``minikafka.schedules``, a warning) and listed in ``self.skipped``.

        Returns:
            What was fired (empty when another process holds the lease or nothing was due).
        """
        fired: list[Fired] = []
        skipped: list[Skipped] = []
        ledger = self.source.ledger
        with ledger.atomic() as conn:
            now = self._now()
            if not store.take_lease_in_current_transaction(conn, LEASE_NAME, self.holder, now, now + self.lease_ms):
                self.skipped = []
                return []
            for row in store.due(conn, now):
                dues, nxt = _dues(row, now)
                try:
                    with ledger.atomic():  # a savepoint: one schedule's failure undoes only its own fire
                        fired_now = self._fire_in_current_transaction(conn, row, dues, now)
                        store.advance_in_current_transaction(conn, row["name"], nxt, max(fired_now, default=None))
                except _FATAL:
                    raise
                except Exception as exc:  # noqa: BLE001 - any one schedule's failure is recorded, not raised
                    error = _one_line(exc)
                    for due in dues:
                        if not store.claim_fire_in_current_transaction(conn, row["name"], due, now):
                            continue  # fired already (another process ticked it)
                        store.skip_fire_in_current_transaction(conn, row["name"], due, now, error)
                        skipped.append(Skipped(row["name"], _dt(due), error))
                    store.advance_in_current_transaction(conn, row["name"], nxt, None)
                    continue
                fired += [Fired(row["name"], _dt(due), job_id) for due, job_id in fired_now.items()]
            store.prune_fires_in_current_transaction(conn, now - FIRES_KEPT_MS)
        for s in skipped:
            log.warning("schedule %r: skipped due %s: %s", s.schedule, s.due.isoformat(), s.error)
        self.skipped = skipped
        return fired

    def _fire_in_current_transaction(self, conn: sqlite3.Connection, row: dict, dues: list[int],
                                     now: int) -> dict[int, int]:
        """Enqueue one job per due time not fired yet; {due: job id}, oldest first."""
        q = self._queue(conn, row["topic"], row["consumer"])
        payload = json.loads(row["payload"])
        out: dict[int, int] = {}
        for due in dues:
            if not store.claim_fire_in_current_transaction(conn, row["name"], due, now):
                continue
            job_id = q.enqueue(payload, run_at=due / 1000, priority=row["priority"])
            store.set_fire_row_in_current_transaction(conn, row["name"], due, job_id)
            out[due] = job_id
        return out

    def release(self) -> None:
        """Give up the leader lease now (another process may take it at its next tick)."""
        with self.source.ledger.atomic() as conn:
            store.release_lease_in_current_transaction(conn, LEASE_NAME, self.holder)

    def next_due_in(self) -> float | None:
        """Seconds until the earliest schedule falls due (0 if one has), None without schedules."""
        nxt = store.next_due(self.source.ledger.conn)
        return None if nxt is None else max(0.0, (nxt - self._now()) / 1000)

    def run(self, stop: threading.Event | None = None, *, on_fire: Callable[[Fired], None] | None = None,
            on_skip: Callable[[Skipped], None] | None = None) -> None:
        """Tick until ``stop`` is set: at each due time, and often enough to keep the lease
        (a third of it). A schedule added meanwhile by another process is seen within that.
        ``on_fire`` is called for each due time fired, ``on_skip`` for each one skipped."""
        stop = stop or threading.Event()
        try:
            while not stop.is_set():
                for f in self.tick():
                    if on_fire:
                        on_fire(f)
                for s in self.skipped:
                    if on_skip:
                        on_skip(s)
                due = self.next_due_in()
                renew = self.lease_ms / 3000
                stop.wait(renew if due is None else min(max(due, 0.01), renew))
        finally:
            if not self.source.ledger.closed:
                self.release()

    def _queue(self, conn: sqlite3.Connection, topic: str, consumer: str) -> Queue:
        """The queue, whose consumer ``store.due`` found registered: a handle kept from an earlier
        tick is used only while it names that same consumer (a queue dropped and opened again
        has a new one)."""
        q = self._queues.get((topic, consumer))
        if q is None or q.consumer_id != queue_store.consumer_id(conn, topic, consumer):
            model = self.source.model_of(topic)
            q = self.source.topic(topic, model, dedup=self.source.layout(topic).dedup or None).queue(
                consumer, clock=self.clock)
            self._queues[(topic, consumer)] = q
        return q


def _dues(row: dict, now: int) -> tuple[list[int], int]:
    """(the due times to fire now, at most max_catch_up of the latest; the next due time after now)."""
    first, n = row["next_due"], row["max_catch_up"]
    if row["every_ms"]:
        every = row["every_ms"]
        count = (now - first) // every + 1
        keep = min(count, n)
        return [first + i * every for i in range(count - keep, count)], first + count * every
    return cron_latest(row["cron"], now, first, n), cron_next(row["cron"], now)


def _one_line(exc: BaseException) -> str:
    """The error as one line: a pydantic error's first problems (its text starts with a count)."""
    if isinstance(exc, ValidationError):
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}"
                             for e in exc.errors(include_url=False)[:3])
        return f"ValidationError: the payload no longer fits the queue's model: {problems}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _info(conn: sqlite3.Connection, row: dict, failures: dict[str, tuple[int, str, int, int]]) -> ScheduleInfo:
    topic, consumer = row["topic"], row["consumer"]
    label = topic if topic == consumer else f"{topic}:{consumer}"  # as modes.queues.queue_label
    failure = failures.get(row["name"])
    return ScheduleInfo(row["name"], label, row["cron"],
                        None if row["every_ms"] is None else row["every_ms"] / 1000, json.loads(row["payload"]),
                        row["priority"], row["max_catch_up"], bool(row["paused"]), _dt(row["next_due"]),
                        _dt(row["last_fired"]), queue_dropped=not store.queue_exists(conn, topic, consumer),
                        last_error=failure[1] if failure else None,
                        last_error_at=_dt(failure[2]) if failure else None,
                        skipped=failure[3] if failure else 0)

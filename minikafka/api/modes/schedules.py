"""Periodic jobs: schedules that enqueue a payload into a queue on a cron expression or every N seconds.

A schedule is a row in the ledger (``ledger.schedules``): its queue, ``cron`` (five-field,
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

Crash contract: the fire row, the job and the schedule's next due time commit together.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ...errors import InvalidSettingError, ScheduleNotFoundError
from ...ledger import schedules as store
from ...util.clock import format_timestamp
from ...util.optional import require

if TYPE_CHECKING:
    from ..core.handles import SourceHandle

Queue = Any  # a modes.queues.Queue (not imported: queues imports this module for q.schedule)

__all__ = ["DEFAULT_LEASE", "Fired", "ScheduleInfo", "ScheduleNotFoundError", "Scheduler"]

LEASE_NAME = "scheduler"
DEFAULT_LEASE = 30.0
FIRES_KEPT_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True)
class Fired:
    """One due time fired by a tick: the schedule, the due time (UTC) and the job enqueued."""

    schedule: str
    due: datetime
    job_id: int


@dataclass
class ScheduleInfo:
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

    def asdict(self) -> dict[str, Any]:
        return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in self.__dict__.items()}


def _dt(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _croniter():
    return require("croniter", "schedules").croniter


def check_cron(expr: str) -> str:
    if not isinstance(expr, str) or not _croniter().is_valid(expr):
        raise InvalidSettingError(f"cron must be a cron expression such as '*/5 * * * *', got {expr!r}")
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
        if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not lease > 0:
            raise InvalidSettingError(f"lease must be > 0 seconds, got {lease!r}")
        self.source = source
        self.clock = clock or time.time
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_ms = int(lease * 1000)
        self._queues: dict[tuple[str, str], Queue] = {}

    def _now(self) -> int:
        return int(round(self.clock() * 1000))

    # -- defining ---------------------------------------------------------------
    def add(self, queue: Queue, name: str, *, cron: str | None = None, every: float | None = None,
            payload: BaseModel | dict[str, Any] | None = None, priority: int = 0,
            max_catch_up: int = 1) -> ScheduleInfo:
        """Create or replace the schedule ``name`` enqueueing ``payload`` into ``queue``.

        Raises:
            ValueError: not exactly one of cron/every, a bad cron expression, every <= 0,
                max_catch_up not an integer >= 1, an empty name.
            pydantic.ValidationError: the payload does not fit the queue's model.
            MissingDependencyError: cron= without croniter installed.
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidSettingError(f"a schedule name must be a non-empty string, got {name!r}")
        if (cron is None) == (every is None):
            raise InvalidSettingError("give exactly one of cron= (a cron expression) or every= (seconds)")
        if every is not None and (isinstance(every, bool) or not isinstance(every, (int, float)) or not every > 0):
            raise InvalidSettingError(f"every must be > 0 seconds, got {every!r}")
        if cron is not None:
            check_cron(cron)
        if isinstance(max_catch_up, bool) or not isinstance(max_catch_up, int) or max_catch_up < 1:
            raise InvalidSettingError(f"max_catch_up must be an integer >= 1, got {max_catch_up!r}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidSettingError(f"priority must be an integer, got {priority!r}")
        model = queue.rows.validate(payload if payload is not None else {})
        now = self._now()
        every_ms = None if every is None else max(1, int(round(every * 1000)))
        next_due = cron_next(cron, now) if cron is not None else now + every_ms
        row = {"name": name, "topic": queue.topic.name, "consumer": queue.consumer, "cron": cron,
               "every_ms": every_ms, "payload": model.model_dump_json(), "priority": priority,
               "max_catch_up": max_catch_up, "paused": 0, "next_due": next_due, "last_fired": None,
               "created_at": format_timestamp(_dt(now))}
        with self.source.ledger.atomic() as conn:
            store.save_in_current_transaction(conn, row)
        return self.get(name)

    def get(self, name: str) -> ScheduleInfo:
        row = store.get(self.source.ledger.conn, name)
        if row is None:
            raise ScheduleNotFoundError(f"no schedule named {name!r} in {self.source.path!r}")
        return _info(row)

    def list(self) -> list[ScheduleInfo]:
        """Every schedule, by name."""
        return [_info(r) for r in store.all_schedules(self.source.ledger.conn)]

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

    def tick(self) -> list[Fired]:
        """Fire every due time that has come, if this scheduler holds (or can take) the leader lease.

        Returns:
            What was fired (empty when another process holds the lease or nothing was due).
        """
        fired: list[Fired] = []
        with self.source.ledger.atomic() as conn:
            now = self._now()
            if not store.take_lease_in_current_transaction(conn, LEASE_NAME, self.holder, now, now + self.lease_ms):
                return []
            for row in store.due(conn, now):
                dues, nxt = _dues(row, now)
                q = self._queue(row["topic"], row["consumer"])
                payload = json.loads(row["payload"])
                last = None
                for due in dues:
                    if not store.claim_fire_in_current_transaction(conn, row["name"], due, now):
                        continue
                    job_id = q.enqueue(payload, run_at=due / 1000, priority=row["priority"])
                    store.set_fire_row_in_current_transaction(conn, row["name"], due, job_id)
                    fired.append(Fired(row["name"], _dt(due), job_id))
                    last = due
                store.advance_in_current_transaction(conn, row["name"], nxt, last)
            store.prune_fires_in_current_transaction(conn, now - FIRES_KEPT_MS)
        return fired

    def release(self) -> None:
        """Give up the leader lease now (another process may take it at its next tick)."""
        with self.source.ledger.atomic() as conn:
            store.release_lease_in_current_transaction(conn, LEASE_NAME, self.holder)

    def next_due_in(self) -> float | None:
        """Seconds until the earliest schedule falls due (0 if one has), None without schedules."""
        nxt = store.next_due(self.source.ledger.conn)
        return None if nxt is None else max(0.0, (nxt - self._now()) / 1000)

    def run(self, stop: threading.Event | None = None, *, on_fire: Callable[[Fired], None] | None = None) -> None:
        """Tick until ``stop`` is set: at each due time, and often enough to keep the lease
        (a third of it). A schedule added meanwhile by another process is seen within that."""
        stop = stop or threading.Event()
        try:
            while not stop.is_set():
                for f in self.tick():
                    if on_fire:
                        on_fire(f)
                due = self.next_due_in()
                renew = self.lease_ms / 3000
                stop.wait(renew if due is None else min(max(due, 0.01), renew))
        finally:
            if not self.source.ledger.closed:
                self.release()

    def _queue(self, topic: str, consumer: str) -> Queue:
        q = self._queues.get((topic, consumer))
        if q is None:
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


def _info(row: dict) -> ScheduleInfo:
    topic, consumer = row["topic"], row["consumer"]
    label = topic if topic == consumer else f"{topic}:{consumer}"  # as modes.queues.queue_label
    return ScheduleInfo(row["name"], label, row["cron"],
                        None if row["every_ms"] is None else row["every_ms"] / 1000, json.loads(row["payload"]),
                        row["priority"], row["max_catch_up"], bool(row["paused"]), _dt(row["next_due"]),
                        _dt(row["last_fired"]))

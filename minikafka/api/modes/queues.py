"""Work queues on topics: competing workers, leases, retries, a dead letter (honker's model).

A queue is one named consumer of a topic. Each live row of the queue has a state row in
the ledger's queue-jobs table (``ledger.consuming.queues``: pending or processing: priority, run_at, lease, attempts,
worker, last error). ``claim_batch`` takes, in one ``UPDATE ... RETURNING``, the rows that
are pending and due or whose lease expired, ordered by priority (higher first) then age;
each claim sets a lease and counts an attempt. An acked row leaves the state table and
stays in the topic as history, acked for the queue's consumer. A row that runs out of
attempts (or fails) turns ``dead``: it keeps its state row and gets a row in
the quarantine table, the project's dead letter, until ``requeue``.

Rows appended to the topic by other means (``topic.append``, a Spark stage) become jobs
too: each claim first syncs rows above the queue's ``synced_upto`` mark that are still
pending for its consumer.

Times are integer milliseconds since the Unix epoch, read from the queue's clock (the
system clock unless one is injected for tests).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from ...errors import (
    ArgumentTypeError,
    InvalidRecordError,
    InvalidSettingError,
    JobCancelledError,
    JobFailedError,
    JobNotFoundError,
    JobNotOursError,
    QueueNotFoundError,
)
from ...ledger.consuming import (
    ORIGIN,
    Claim,
    Quarantined,
    job_state,
    quarantine_in_current_transaction,
    revive_dead_in_current_transaction,
)
from ...ledger.consuming import queues as store
from ...ledger.topics import acks, json_value_refusal, validate_consumer_name
from ...ledger.transactions import Event, Pause, drive, drive_async, pause, pause_async, until
from ...util.clock import format_timestamp
from ...util.millis import MAX_SECONDS, duration_ms, instant_ms
from ...util.timeouts import check_timeout
from ..core.rows import TopicRows
from ..core.transaction import Transaction, joined

if TYPE_CHECKING:
    from ..core.handles import SourceHandle, TopicHandle

ModelT = TypeVar("ModelT", bound=BaseModel)
Clock = Callable[[], float]

__all__ = ["ORIGIN", "Job", "JobInfo", "Queue", "open_queue", "result_json", "check_settings", "find_queue", "queue_label", "revive_dead_in_current_transaction",
           "split_label", "stored_settings"]


DEFAULT_VISIBILITY_TIMEOUT = 300.0
DEFAULT_MAX_ATTEMPTS = 3
MAX_ATTEMPTS = 2**31 - 1  # far beyond any retry policy; fits every integer column it is stored in
DEFAULT_RESULT_TTL = 7 * 24 * 3600.0

log = logging.getLogger("minikafka.queues")


def check_settings(visibility_timeout: Any, max_attempts: Any, clock: Any = None, result_ttl: Any = None) -> None:
    """Check a queue's settings before anything is created (None: as stored, else the default).

    Raises:
        ValueError: visibility_timeout is not a positive number of seconds (at most a century),
            result_ttl not one >= 0, max_attempts not an integer from 1 to 2**31 - 1.
        TypeError: clock is not callable.
    """
    if visibility_timeout is not None and (
            isinstance(visibility_timeout, bool) or not isinstance(visibility_timeout, (int, float))
            or not 0 < visibility_timeout <= MAX_SECONDS):
        raise InvalidSettingError(
            f"visibility_timeout must be > 0 seconds (at most a century), got {visibility_timeout!r}")
    if max_attempts is not None and (isinstance(max_attempts, bool) or not isinstance(max_attempts, int)
                                     or not 1 <= max_attempts <= MAX_ATTEMPTS):
        raise InvalidSettingError(f"max_attempts must be an integer from 1 to {MAX_ATTEMPTS}, got {max_attempts!r}")
    if result_ttl is not None and (isinstance(result_ttl, bool) or not isinstance(result_ttl, (int, float))
                                   or not 0 <= result_ttl <= MAX_SECONDS):
        raise InvalidSettingError(f"result_ttl must be >= 0 seconds (at most a century), got {result_ttl!r}")
    if clock is not None and not callable(clock):
        raise ArgumentTypeError(f"clock must be a callable returning epoch seconds, got {clock!r}")


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _dt(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def queue_label(topic: str, consumer: str) -> str:
    """The queue's name: the topic's when its consumer has the same name, else ``topic:consumer``."""
    return topic if topic == consumer else f"{topic}:{consumer}"


def split_label(name: str) -> tuple[str, str]:
    """``topic:consumer`` or ``topic`` (consumer named like the topic) -> (topic, consumer)."""
    topic, sep, consumer = name.partition(":")  # topic names never hold ':'
    return (topic, consumer) if sep else (name, name)


@dataclass(eq=False)
class Job(Generic[ModelT]):
    """One claimed row: ``id`` (the row's offset in its topic), ``data`` (the model),
    ``attempts`` (this claim included), ``worker_id`` and ``lease_expires_at`` (UTC).

    ``ack``, ``retry``, ``fail`` and ``heartbeat`` act only while this claim is still the
    row's current claim and its lease has not expired; otherwise they return False and
    change nothing (a late worker never touches someone else's claim).

    Finished with ``tx=`` (or inside any open transaction), the job is finished only if that
    transaction commits: rolled back, the object is its holder's again, as the ledger says
    (``ack``, ``retry``, ``fail`` and ``heartbeat`` work on it as before).
    """

    id: int
    data: ModelT
    attempts: int
    worker_id: str
    lease_expires_at: datetime
    priority: int = 0
    max_attempts: int | None = None  # this job's own limit (set at enqueue), else the queue's
    _queue: Queue | None = field(default=None, repr=False)
    _finished: str | None = field(default=None, repr=False)

    def _q(self) -> Queue:
        if self._queue is None:
            raise JobNotOursError(f"job {self.id} was not claimed through a queue")
        if self._finished:
            raise JobNotOursError(f"job {self.id} was already {self._finished} by this worker")
        return self._queue

    def ack(self, result: Any = None, *, tx: Transaction | None = None) -> bool:
        """Mark the job done (acked for the queue's consumer; the row stays in the topic).

        Args:
            result: the job's result (JSON: dicts, lists, strings, finite numbers, booleans,
                None; a pydantic model is stored as its JSON dump), kept ``result_ttl`` seconds
                for ``q.result(job_id)`` and ``q.get(job_id)`` (None: nothing stored).
            tx: join the caller's transaction (the business write and the ack commit together).

        Returns:
            False when the lease expired (the row may have been reclaimed) or the job was
            cancelled: nothing changed.

        Raises:
            JobNotOursError: the job was not claimed through a queue, or is already finished.
            InvalidRecordError: ``result`` cannot be stored as JSON (nothing changed).

        Emits:
            message_handled, after the commit.
        """
        return self._q()._finish(self, "acked", tx=tx, result=result)

    def retry(self, delay: float = 60, error: str = "", *, tx: Transaction | None = None) -> bool:
        """Back to pending after ``delay`` seconds, or to the dead letter when attempts are used up.

        Returns:
            False when the lease expired: nothing changed.
        """
        return self._q()._finish(self, "retried", delay=delay, error=error, tx=tx)

    def fail(self, error: str, *, tx: Transaction | None = None) -> bool:
        """Move the job to the dead letter now, with ``error`` as its reason.

        Returns:
            False when the lease expired: nothing changed.
        """
        return self._q()._finish(self, "failed", error=error, tx=tx)

    def heartbeat(self, extend: float | None = None) -> bool:
        """Extend the lease to now + ``extend`` seconds (default: the visibility timeout).

        Only a lease that is still ours and still valid is extended: an expired lease is
        never revived, since another worker may hold the row now.

        Returns:
            True if the lease was extended.
        """
        return self._q()._heartbeat(self, extend)


class Queue(Generic[ModelT]):
    """A work queue: one named consumer of a topic, with leases, retries and a dead letter.

    Get one from ``source.queue(name, Model, visibility_timeout=300, max_attempts=3)`` or
    ``topic.queue(consumer, visibility_timeout=..., max_attempts=...)``.

    Settings: a new queue takes the ones given (default 300 s and 3 attempts); reopening
    keeps the stored ones unless given again, and a setting given with another value
    updates the stored one (it is policy, not structure, like a stream's ``max_age``).
    Lowering ``max_attempts`` sends pending jobs that have used up their attempts to the
    dead letter.
    """

    def __init__(self, topic: TopicHandle, consumer: str, *, visibility_timeout: float | None = None,
                 max_attempts: int | None = None, clock: Clock | None = None,
                 result_ttl: float = DEFAULT_RESULT_TTL):
        check_settings(visibility_timeout, max_attempts, clock, result_ttl)
        self.result_ttl = float(result_ttl)
        validate_consumer_name(consumer)
        self.topic = topic
        self.source: SourceHandle = topic.source
        self.rows: TopicRows[ModelT] = topic.rows
        self.consumer = consumer
        self.clock: Clock = clock or time.time
        now = self._now_ms()
        with self.source.ledger.atomic() as conn:
            stored = store.stored_settings(conn, topic.name, consumer)
            stored_vt_ms, stored_attempts = stored if stored is not None else (None, None)
            if visibility_timeout is None:
                vt_ms = stored_vt_ms if stored_vt_ms is not None else _ms(DEFAULT_VISIBILITY_TIMEOUT)
            else:
                vt_ms = max(1, _ms(float(visibility_timeout)))
            if max_attempts is None:
                max_attempts = stored_attempts if stored_attempts is not None else DEFAULT_MAX_ATTEMPTS
            self._vt_ms = vt_ms
            self.visibility_timeout = vt_ms / 1000
            self.max_attempts = max_attempts
            self.consumer_id = acks.register_consumer_in_current_transaction(
                conn, topic.name, consumer, self._now_text(now))
            store.save_settings_in_current_transaction(conn, self.consumer_id, topic.name, consumer, self._vt_ms,
                                                       max_attempts, self._now_text(now))
            self._bury_exhausted_in_current_transaction(conn, now, pending=True)
        if stored is not None and (stored_vt_ms, stored_attempts) != (self._vt_ms, self.max_attempts):
            log.info("queue %r: settings changed from visibility_timeout=%s, max_attempts=%s to %s, %s",
                     self.name, stored_vt_ms / 1000, stored_attempts, self.visibility_timeout, self.max_attempts)

    @property
    def name(self) -> str:
        return queue_label(self.topic.name, self.consumer)

    @property
    def model(self) -> type[ModelT]:
        return self.topic.model

    def __repr__(self) -> str:
        return (f"Queue({self.name!r}, {self.model.__name__}, visibility_timeout={self.visibility_timeout}, "
                f"max_attempts={self.max_attempts})")

    # -- time -------------------------------------------------------------------
    def _now_ms(self) -> int:
        return _ms(self.clock())

    def _now_text(self, now_ms: int) -> str:
        return format_timestamp(datetime.fromtimestamp(now_ms / 1000, tz=timezone.utc))

    @property
    def _conn(self):
        return self.rows.conn

    # -- producing --------------------------------------------------------------
    def enqueue(self, payload: ModelT | dict[str, Any], delay: float | None = None,
                run_at: datetime | float | None = None, priority: int = 0,
                tx: Transaction | None = None, *, max_attempts: int | None = None,
                expires: datetime | float | None = None) -> int:
        """Validate and append one job to the queue's topic.

        Args:
            payload: a model instance or a dict.
            delay: seconds from now before the job is due; wins over ``run_at``.
            run_at: when the job is due (a datetime, naive taken as UTC, or epoch seconds).
            priority: higher is claimed first; equal priorities go oldest first.
            tx: join the caller's transaction (``source.transaction()``).
            max_attempts: this job's own limit of attempts (None: the queue's).
            expires: seconds from now (a number) or a datetime after which the job must not
                run: a claim after that moves it to the dead letter with the reason 'expired'.

        Returns:
            The job's id (the row's offset in the topic).

        Raises:
            pydantic.ValidationError: the payload does not fit the model (nothing enqueued).
            InvalidDurationError: (a ValueError) delay or expires not a finite number of seconds
                >= 0 (at most a century).
            InvalidSettingError: (a ValueError) run_at not a datetime or finite epoch seconds.
            ValueError: a priority that is not a 64-bit integer, max_attempts not an integer from 1 to 2**31 - 1.
            DuplicateMessageError: the topic's dedup key is already stored.
            TransactionError: tx is closed or belongs to another Source.

        Emits:
            message_appended, after the commit.
        """
        if isinstance(priority, bool) or not isinstance(priority, int) or not -2**63 <= priority < 2**63:
            raise InvalidSettingError(f"priority must be a 64-bit integer, got {priority!r}")
        check_settings(None, max_attempts)
        now = self._now_ms()
        due = self._due_ms(now, delay, run_at)
        expires_at = self._expires_ms(now, expires)
        model = self.rows.validate(payload)
        # inside tx no savepoint: only the first statement (the topic insert) can fail
        with joined(self.source, tx, savepoint=False) as conn:
            row_id = self.rows.insert_one_in_current_transaction(model, now=self._now_text(now))
            store.add_job_in_current_transaction(conn, self.consumer_id, row_id, priority, due)
            if max_attempts is not None or expires_at is not None:
                store.set_options_in_current_transaction(conn, self.consumer_id, row_id, max_attempts, expires_at)
        return row_id

    @staticmethod
    def _expires_ms(now: int, expires: datetime | float | None) -> int | None:
        if expires is None:
            return None
        if isinstance(expires, datetime):
            return instant_ms(expires, "expires")
        return now + duration_ms(expires, "expires", zero=True, also=" or a datetime")

    @staticmethod
    def _due_ms(now: int, delay: float | None, run_at: datetime | float | None) -> int:
        if delay is not None:
            return now + duration_ms(delay, "delay", zero=True)
        if run_at is None:
            return now
        return instant_ms(run_at, "run_at")

    # -- claiming ---------------------------------------------------------------
    def _unsynced(self, conn) -> tuple[int, int]:
        synced = store.synced_upto(conn, self.consumer_id)
        if synced is None:
            raise QueueNotFoundError(f"queue {self.name!r} was dropped (its consumer was unregistered)")
        return synced, self.topic.high_watermark()

    def _sync_in_current_transaction(self, conn, now: int) -> None:
        """Give rows appended by other means (above synced_upto, still pending for us) a state row."""
        synced, top = self._unsynced(conn)
        if top <= synced:
            return
        store.sync_in_current_transaction(conn, self.consumer_id, self.topic.layout.table, synced, top, now)

    def claimable(self) -> bool:
        """Whether a claim now could return a job (a read: no write lock taken)."""
        conn = self._conn
        now = self._now_ms()
        synced, top = self._unsynced(conn)
        if top > synced:
            return True
        return store.has_claimable(conn, self.consumer_id, now)

    def next_due_in(self) -> float | None:
        """Seconds until a pending row falls due or a lease expires (0 if one already has), else None."""
        now = self._now_ms()
        pending, lease = store.next_times(self._conn, self.consumer_id)
        candidates = [v for v in (pending, lease) if v is not None]
        if not candidates:
            return None
        first = min(candidates)
        return max(0.0, (first - now) / 1000)

    def claim_batch(self, worker_id: str, n: int) -> list[Job[ModelT]]:
        """Claim up to ``n`` jobs for ``worker_id`` in one statement.

        Only rows that are pending and due, or whose lease expired, are claimed; each claim
        sets a lease of ``visibility_timeout`` and counts an attempt. A claimable row that
        has used all its attempts goes to the dead letter instead (first).

        Returns:
            The jobs, highest priority first, then oldest.

        Raises:
            ValueError: an empty worker id or n < 0.
        """
        if not isinstance(worker_id, str) or not worker_id:
            raise InvalidSettingError(f"worker_id must be a non-empty string, got {worker_id!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InvalidSettingError(f"n must be an integer >= 0, got {n!r}")
        if n == 0 or not self.claimable():
            return []
        with self.source.ledger.atomic() as conn:
            now = self._now_ms()  # after the write lock: waiting for it must not shorten leases
            self._sync_in_current_transaction(conn, now)
            self._bury_exhausted_in_current_transaction(conn, now)
            if store.any_expiring(conn, self.consumer_id):
                expired = store.bury_expired_in_current_transaction(conn, self.consumer_id, now)
                if expired:
                    self._quarantine_in_current_transaction(conn, expired, now)
            rows = store.claim_in_current_transaction(conn, self.consumer_id, worker_id, now + self._vt_ms,
                                                      self.max_attempts, now, n)
            if not rows:
                return []
            rows.sort(key=lambda r: (-r[3], r[4], r[0]))
            data = self._load([r[0] for r in rows])
        return [Job(id=r[0], data=data[r[0]], attempts=r[1], worker_id=worker_id,
                    lease_expires_at=_dt(r[2]), priority=r[3], max_attempts=r[5], _queue=self) for r in rows]

    def claim_one(self, worker_id: str) -> Job[ModelT] | None:
        """Claim one job, or return None when nothing is claimable now."""
        jobs = self.claim_batch(worker_id, 1)
        return jobs[0] if jobs else None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a claim may succeed: a commit by anyone, a due time, a lease expiry.

        Returns:
            True if something is claimable, False on timeout.

        Raises:
            InvalidDurationError: (a ValueError) a timeout that is not a finite number of seconds >= 0.
        """
        return bool(drive(self.source.watcher, self._wait_steps(timeout)))

    async def wait_async(self, timeout: float | None = None) -> bool:
        """``wait`` for asyncio: the event loop keeps running while nothing is claimable (the
        same checks and loop as ``wait``)."""
        return bool(await drive_async(self.source.watcher, self._wait_steps(timeout)))

    def _wait_steps(self, timeout: float | None):
        timeout = check_timeout(timeout, "wait timeout")
        return until(self.source.watcher, self.claimable, timeout, next_deadline=self.next_due_in)

    async def claim_async(self, worker_id: str, idle_poll: float = 5.0) -> AsyncIterator[Job[ModelT]]:
        """``claim`` for asyncio: ``async for job in q.claim_async("w1")``. Between jobs it awaits
        the watcher (a commit by any process, a due time, ``idle_poll``) without blocking the
        loop; each claim itself is one short write on the loop's thread (the same loop as ``claim``)."""
        watcher = self.source.watcher
        for step in self._claim_steps(worker_id, idle_poll):
            if isinstance(step, Pause):
                await pause_async(watcher, step)
            else:
                yield step

    async def result_async(self, job_id: int, timeout: float | None = None) -> Any:
        """``result`` for asyncio (the same checks, loop and errors)."""
        info = await drive_async(self.source.watcher, self._result_steps(job_id, timeout))
        return self._result_or_timeout(job_id, info, timeout)

    def claim(self, worker_id: str, idle_poll: float = 5.0) -> Iterator[Job[ModelT]]:
        """Yield jobs forever, one claim at a time; sleep between them until a wake-up.

        It wakes on a commit by any process (the Source's watcher), the next due time or
        lease expiry, or after ``idle_poll`` seconds at most. Stop by breaking out of the loop.

        Raises:
            InvalidDurationError: (at the first step) an idle_poll that is not a finite number > 0.
        """
        watcher = self.source.watcher
        for step in self._claim_steps(worker_id, idle_poll):
            if isinstance(step, Pause):
                pause(watcher, step)
            else:
                yield step

    def _claim_steps(self, worker_id: str, idle_poll: float) -> Iterator[Job[ModelT] | Pause]:
        """The one loop of ``claim`` and ``claim_async``: a claimed job, or a ``Pause`` to wait out."""
        idle_poll = check_timeout(idle_poll, "idle_poll", positive=True)
        watcher = self.source.watcher
        while True:
            mark = watcher.mark()
            job = self.claim_one(worker_id)
            if job is not None:
                yield job
                continue
            due = self.next_due_in()
            timeout = idle_poll if due is None else (due if idle_poll is None else min(due, idle_poll))
            yield Pause(mark, timeout)

    def _load(self, ids: list[int]) -> dict[int, ModelT]:
        return self.rows.load(ids)

    # -- finishing --------------------------------------------------------------
    def _claim(self, job: Job) -> Claim:
        return Claim(self.consumer_id, job.id, job.worker_id, job.attempts)

    def _finish(self, job: Job, how: str, *, delay: float = 0, error: str = "",
                tx: Transaction | None = None, result: Any = None) -> bool:
        if job._queue is not self:
            raise JobNotOursError(f"job {job.id} was claimed through another queue, not {self.name!r}")
        delay_ms = duration_ms(delay, "delay", zero=True) if how == "retried" else 0
        error = "" if error is None else str(error)
        result_text = result_json(self.name, job.id, result)
        job_max = job.max_attempts or self.max_attempts
        with joined(self.source, tx) as conn:
            now = self._now_ms()  # after the write lock: a lease that ran out meanwhile is not ours
            claim = self._claim(job)
            if how == "acked":
                done = store.delete_claim_in_current_transaction(conn, claim, now)
                if done:
                    self._ack_rows_in_current_transaction(conn, [job.id], now)
                    if job.max_attempts is not None:
                        store.forget_options_in_current_transaction(conn, self.consumer_id, [job.id])
                    if result_text is not None:
                        store.save_outcome_in_current_transaction(conn, self.consumer_id, job.id, "done",
                                                                  result_text, now, now + _ms(self.result_ttl))
            elif how == "retried" and job.attempts < job_max:
                done = store.retry_claim_in_current_transaction(conn, claim, now, now + delay_ms, error)
            else:
                reason = error or "failed"
                done = store.kill_claim_in_current_transaction(conn, claim, now, reason)
                if done:
                    self._quarantine_in_current_transaction(conn, [(job.id, job.attempts, reason)], now)
        if done:
            self._mark_finished(job, how)
        return bool(done)

    def _mark_finished(self, job: Job, how: str) -> None:
        """The Job finished ``how``, as far as the transaction it happened in commits: inside the
        caller's ``tx`` (or any open transaction) a rollback gives the job back to its holder."""
        job._finished = how
        self.source.ledger.on_rollback(lambda: setattr(job, "_finished", None))

    def _heartbeat(self, job: Job, extend: float | None) -> bool:
        if job._queue is not self:
            raise JobNotOursError(f"job {job.id} was claimed through another queue, not {self.name!r}")
        extend_ms = self._vt_ms if extend is None else duration_ms(extend, "extend")
        with self.source.ledger.atomic() as conn:
            now = self._now_ms()
            lease = now + extend_ms
            done = store.extend_lease_in_current_transaction(conn, self._claim(job), now, lease)
        if done:
            before = job.lease_expires_at
            job.lease_expires_at = _dt(lease)
            self.source.ledger.on_rollback(lambda: setattr(job, "lease_expires_at", before))
        return bool(done)

    def ack_batch(self, jobs: list[Job[ModelT]], *, tx: Transaction | None = None) -> int:
        """Ack many claimed jobs in one transaction; returns how many were still ours."""
        jobs = list(jobs)
        for job in jobs:
            if job._queue is not self:
                raise JobNotOursError(f"job {job.id} was claimed through another queue, not {self.name!r}")
        if not jobs:
            return 0
        claims = [(j.id, j.worker_id, j.attempts) for j in jobs if not j._finished]
        with joined(self.source, tx) as conn:
            now = self._now_ms()
            acked = store.delete_claims_in_current_transaction(conn, self.consumer_id, now, claims)
            if acked:
                self._ack_rows_in_current_transaction(conn, acked, now)
                own = [j.id for j in jobs if j.max_attempts is not None]
                if own:
                    store.forget_options_in_current_transaction(conn, self.consumer_id, own)
        done = set(acked)
        for job in jobs:
            if job.id in done:
                self._mark_finished(job, "acked")
        return len(acked)

    def _ack_rows_in_current_transaction(self, conn, row_ids: list[int], now: int) -> None:
        text = self._now_text(now)
        consumers = acks.consumer_ids(conn, self.topic.name)
        if len(row_ids) == 1:
            acks.ack_in_current_transaction(conn, self.topic.name, row_ids[0], self.consumer_id, text, consumers)
        else:
            acks.ack_many_in_current_transaction(conn, self.topic.name, row_ids, self.consumer_id, text, consumers)
        ledger = self.source.ledger
        if ledger.on_event:
            for row_id in row_ids:
                ledger.emit(Event("message_handled", self.topic.name, row_id, {"consumer": self.consumer}))

    def _bury_exhausted_in_current_transaction(self, conn, now: int, *, pending: bool = False) -> None:
        """Dead-letter claimable rows that have no attempt left.

        Claims look only at expired leases (an index range over the few expired ones).
        Pending rows with no attempt left exist only after ``max_attempts`` was lowered
        (retry dead-letters the last attempt itself), so opening a queue sweeps those.
        """
        rows = store.bury_exhausted_in_current_transaction(conn, self.consumer_id, now, self.max_attempts,
                                                           pending=pending)
        if rows:
            self._quarantine_in_current_transaction(conn, rows, now)

    def _quarantine_in_current_transaction(self, conn, rows, now: int) -> None:
        data = self._load([r[0] for r in rows])
        text = self._now_text(now)
        quarantine_in_current_transaction(conn, [
            Quarantined(self.topic.name, data[row_id].model_dump_json() if row_id in data else None, reason, ORIGIN,
                        text, consumer=self.consumer, row_id=row_id, attempts=attempts)
            for row_id, attempts, reason in rows])

    # -- periodic jobs ------------------------------------------------------------
    def schedule(self, name: str, *, cron: str | None = None, every: float | None = None,
                 payload: ModelT | dict[str, Any] | None = None, priority: int = 0, max_catch_up: int = 1):
        """Create or replace the periodic job ``name`` enqueueing ``payload`` here.

        Args:
            cron: a five-field cron expression, in UTC (``"*/5 * * * *"``; needs croniter:
                ``pip install 'minikafka[schedules]'``).
            every: or a period in seconds.
            max_catch_up: after downtime, how many of the latest missed due times fire (default 1).

        Adding the same definition again changes nothing (the schedule's clock keeps running).

        Returns:
            The ``ScheduleInfo``. Jobs are enqueued by ``source.scheduler().tick()``/``run()``
            (or ``minikafka schedule tick|run``) in whichever process holds the leader lease.

        Raises:
            ScheduleConfigError: (a ValueError) a cron expression that is not five fields, or
                this queue's topic has dedup fields (every fire after the first would be a
                duplicate). See ``Scheduler.add`` for the rest.
        """
        from .schedules import Scheduler

        return Scheduler(self.source, clock=self.clock).add(self, name, cron=cron, every=every, payload=payload,
                                                            priority=priority, max_catch_up=max_catch_up)

    # -- one job: look up, cancel, result -------------------------------------------
    def get(self, job_id: int) -> JobInfo | None:
        """What is known of one job: its state and counters, its result once done.

        States: ``pending`` (waiting, or its lease expired), ``processing``, ``dead`` (in the
        dead letter), ``done`` (acked), ``cancelled`` (for good: a cancellation is never
        pruned). A done job's ``result`` is kept ``result_ttl`` seconds; after that it reads
        as done with no result.

        Returns:
            A ``JobInfo``, or None when the topic has no row ``job_id``.
        """
        job_id = _check_job_id(job_id)
        conn = self._conn
        now = self._now_ms()
        live = store.job_state(conn, self.consumer_id, job_id)
        if live is not None:
            state, attempts, run_at, last_error, worker, lease, priority, own_max, expires_at = live
            state = job_state(state, lease, now)
            return JobInfo(job_id, self.name, state, attempts, own_max or self.max_attempts, _dt(run_at), priority,
                           last_error or None, worker if state == "processing" else None,
                           _dt(lease) if state == "processing" else None, _dt(expires_at))
        done = store.outcome(conn, self.consumer_id, job_id)
        if done is not None:
            return JobInfo(job_id, self.name, done[0], None, self.max_attempts,
                           result=None if done[1] is None else json.loads(done[1]), finished_at=_dt(done[2]))
        if not self.rows.exists(job_id):
            return None
        handled = self.rows.is_handled(job_id, self.consumer)
        return JobInfo(job_id, self.name, "done" if handled else "pending", 0 if not handled else None,
                       self.max_attempts)

    def cancel(self, job_id: int, *, tx: Transaction | None = None) -> bool:
        """Cancel a pending or running job: it never runs (again).

        A worker holding it finds out when it acks, retries, fails or heartbeats: each returns
        False and changes nothing. The row stays in the topic, acked for the queue's consumer,
        and the cancellation is kept for good (``result_ttl`` prunes only results): ``get`` says
        ``cancelled`` and ``result`` raises ``JobCancelledError`` however long after.

        Returns:
            True if the job was pending or processing and is now cancelled; False when it was
            already done, dead, cancelled, or there is no such job.
        """
        job_id = _check_job_id(job_id)
        with joined(self.source, tx) as conn:
            now = self._now_ms()
            self._sync_in_current_transaction(conn, now)
            if not store.cancel_in_current_transaction(conn, self.consumer_id, job_id):
                return False
            store.forget_options_in_current_transaction(conn, self.consumer_id, [job_id])
            self._ack_rows_in_current_transaction(conn, [job_id], now)
            store.save_outcome_in_current_transaction(conn, self.consumer_id, job_id, "cancelled", None, now,
                                                      now + _ms(self.result_ttl))
        return True

    def result(self, job_id: int, timeout: float | None = None) -> Any:
        """Wait for a job to finish and return its result (None when acked without one).

        Woken by the Source's watcher (any process's commit), not by polling.

        Raises:
            JobCancelledError: the job was cancelled.
            JobFailedError: the job is in the dead letter (the message holds its last error).
            TimeoutError: not finished within ``timeout`` seconds.
            JobNotFoundError: the topic has no row ``job_id``.
            InvalidDurationError: (a ValueError) timeout not None or a finite number of seconds >= 0.
        """
        info = drive(self.source.watcher, self._result_steps(job_id, timeout))
        return self._result_or_timeout(job_id, info, timeout)

    def _result_steps(self, job_id: int, timeout: float | None):
        """The one check and loop of ``result`` and ``result_async``."""
        timeout = check_timeout(timeout, "result timeout")
        return until(self.source.watcher, lambda: self._finished_info(job_id), timeout)

    def _result_or_timeout(self, job_id: int, info: JobInfo | None, timeout: float | None) -> Any:
        if info is None:
            raise TimeoutError(f"job {job_id} of queue {self.name!r} did not finish within {timeout} s")
        return _result_of(info)

    def _finished_info(self, job_id: int) -> JobInfo | None:
        info = self.get(job_id)
        if info is None:
            raise JobNotFoundError(f"queue {self.name!r} has no job {job_id}")
        return info if info.state in ("done", "cancelled", "dead") else None

    # -- the dead letter and counts -----------------------------------------------
    def dead(self, *, limit: int = 1000) -> list[dict[str, Any]]:
        """Dead jobs, oldest death first: ``id``, ``data``, ``attempts``, ``last_error``, ``died_at``,
        ``quarantine_id``."""
        rows = store.dead_jobs(self._conn, self.consumer_id, self.topic.name, self.consumer, limit)
        data = self._load([r[1] for r in rows]) if rows else {}
        return [{"id": r[1], "data": data.get(r[1]), "attempts": r[2], "last_error": r[3],
                 "died_at": datetime.fromisoformat(r[4]), "quarantine_id": r[0]} for r in rows]

    def requeue(self, ids: list[int] | None = None, *, tx: Transaction | None = None) -> int:
        """Put dead jobs (all, or those ids) back to pending with fresh attempts; returns how many.

        Their rows leave the quarantine table. A job whose ``expires`` has passed loses it (it
        was requeued to run: the next claim must not dead-letter it again); one still ahead stays.
        """
        now = self._now_ms()
        with joined(self.source, tx) as conn:
            if ids is None:
                chosen = store.dead_row_ids(conn, self.consumer_id)
            else:
                chosen = [int(i) for i in ids]
            if not chosen:
                return 0
            moved = revive_dead_in_current_transaction(conn, self.consumer_id, chosen, now)
            store.forget_dead_in_current_transaction(conn, self.topic.name, self.consumer, moved)
        return len(moved)

    def stats(self) -> dict[str, int]:
        """Counts: ``pending`` (waiting or reclaimable), ``processing`` (valid lease), ``dead`` (in the
        dead letter; purging the quarantine forgets them), ``done`` (acked), ``cancelled``."""
        conn = self._conn
        now = self._now_ms()
        counts = store.state_counts(conn, self.consumer_id, now)
        synced, top = self._unsynced(conn)
        unsynced = 0
        if top > synced:
            unsynced = store.count_unsynced(conn, self.consumer_id, self.topic.layout.table, synced)
        dead = store.count_dead(conn, self.consumer_id, self.topic.name, self.consumer) if counts.get("dead") else 0
        cancelled = store.count_outcomes(conn, self.consumer_id, "cancelled")  # acked rows too: not done
        return {
            "pending": counts.get("pending", 0) + unsynced,
            "processing": counts.get("processing", 0),
            "dead": dead,
            "done": self.topic.count("handled", consumer=self.consumer) - cancelled,
            "cancelled": cancelled,
        }


@dataclass
class JobInfo:
    """One job as ``Queue.get`` sees it (times are UTC datetimes; None where unknown)."""

    id: int
    queue: str
    state: str
    attempts: int | None
    max_attempts: int
    run_at: datetime | None = None
    priority: int | None = None
    last_error: str | None = None
    worker_id: str | None = None
    lease_expires_at: datetime | None = None
    expires_at: datetime | None = None
    result: Any = None
    finished_at: datetime | None = None

    def asdict(self) -> dict[str, Any]:
        return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in self.__dict__.items()}


def _check_job_id(job_id: Any) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
        raise InvalidSettingError(f"job_id must be an integer >= 1, got {job_id!r}")
    return job_id


def _result_of(info: JobInfo) -> Any:
    if info.state == "cancelled":
        raise JobCancelledError(f"job {info.id} of queue {info.queue!r} was cancelled")
    if info.state == "dead":
        raise JobFailedError(f"job {info.id} of queue {info.queue!r} is in the dead letter: {info.last_error}")
    return info.result


def result_json(queue: str, job_id: int, result: Any) -> str | None:
    """A job's result as the JSON text stored (None stays None; a pydantic model is dumped).

    Raises:
        InvalidRecordError: a value JSON cannot hold faithfully (``columns.json_value_refusal``,
            the rule streams and notifications share), naming its path.
    """
    if result is None:
        return None
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json")
    problem = json_value_refusal(result, "result")
    if problem is not None:
        raise InvalidRecordError(f"result of job {job_id} of queue {queue!r}: the value cannot be written as JSON: "
                                 f"{problem}; return plain JSON values or a pydantic model")
    return json.dumps(result, allow_nan=False)


def find_queue(source: SourceHandle, name: str) -> tuple[str, str]:
    """(topic, consumer) of a stored queue named ``name`` (``topic`` or ``topic:consumer``).

    Raises:
        QueueNotFoundError: no such queue; the message lists the stored ones.
    """
    topic, consumer = split_label(name)
    conn = source.ledger.conn
    row = store.find_queue(conn, topic, consumer)
    if row is None:
        known = [queue_label(t, c) for t, c in store.queue_pairs(conn)]
        raise QueueNotFoundError(f"no queue named {name!r} in {source.path!r} (queues: {known!r})")
    return row


def open_queue(source: SourceHandle, name: str) -> Queue:
    """The stored queue ``name`` (``topic`` or ``topic:consumer``) with its stored settings, its
    model imported from the catalog (for tools and the CLI).

    Raises:
        QueueNotFoundError: no such queue. MigrationError/LedgerError: the model cannot be imported.
    """
    topic, consumer = find_queue(source, name)
    model = source.model_of(topic)
    return source.topic(topic, model, dedup=source.layout(topic).dedup or None).queue(consumer)


def stored_settings(source: SourceHandle, topic: str, consumer: str) -> tuple[float, int]:
    """(visibility_timeout seconds, max_attempts) as last stored for a queue."""
    row = store.stored_settings(source.ledger.conn, topic, consumer)
    if row is None:
        raise QueueNotFoundError(f"no queue {queue_label(topic, consumer)!r} in {source.path!r}")
    return row[0] / 1000, row[1]

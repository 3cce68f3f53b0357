"""Worker processes for a queue: ``minikafka work MODULE:FUNCTION --queue NAME --concurrency N``.

Each worker process opens its own Source, claims one job at a time and calls the handler
with the job's model instance. A return acks the job; an exception retries it after
``retry_delay * 2**(attempts-1)`` seconds (the dead letter once attempts are used up).
A return value JSON cannot hold dead-letters the job at once, its refusal as the error
(the handler did its work: running it again would not change its answer). A worker
process that dies without stopping (a crash, SIGKILL, ``os._exit``) is reported on
stderr in one line and replaced, up to ``MAX_REPLACEMENTS`` times per worker; its job
runs again once its lease ends.
SIGTERM (or SIGINT) lets the job in flight finish, then the worker exits. The parent
gathers progress from the workers and writes one run-log row for the whole run.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import multiprocessing
import multiprocessing.connection as mp_connection
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import HandlerError, InvalidRecordError, InvalidSettingError
from ...ledger.consuming import (
    INTERRUPTED,
    RunResult,
    new_run_id,
    resume_note,
    start_run_in_current_transaction,
    write_run_in_current_transaction,
)
from ...util.procs import concurrency_limit, die_with_parent
from ...util.results import Result
from .queues import Job, find_queue, stored_settings

if TYPE_CHECKING:
    from ..core.handles import SourceOpener

IDLE_CHECK = 0.5  # seconds between looks at the stop flag while idle
MAX_REPLACEMENTS = 3  # crashed workers are replaced, up to 3 per --concurrency slot (a crash loop ends)
HEARTBEAT_FRACTION = 1 / 3  # a running job's lease is extended every third of the visibility timeout
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def load_handler(ref: str) -> Callable[[Any], Any]:
    """Import ``module:function`` (the current directory is appended to the path, as the CLI does).

    Raises:
        HandlerError: a malformed reference, a module that does not import, a missing or
            non-callable attribute.
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise HandlerError(f"handler {ref!r} must look like MODULE:FUNCTION (e.g. myjobs:summarise)")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # appended: a local file never shadows an installed package
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure of user code is the user's to see
        raise HandlerError(f"cannot import handler module {module_name!r}: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise HandlerError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not callable(target):
        raise HandlerError(f"handler {ref!r} is not callable")
    return target


def backoff_delay(retry_delay: float, attempts: int) -> float:
    """Seconds before the next try of a job whose attempt number ``attempts`` failed."""
    return retry_delay * 2 ** (attempts - 1)


@dataclass
class WorkResult(Result):
    """What a ``work`` run did, summed over its workers."""

    run_id: str
    queue: str
    workers: int
    claimed: int = 0
    acked: int = 0
    retried: int = 0
    dead: int = 0
    lost: int = 0
    crashed: int = 0
    duration_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    interrupted: bool = False  # stopped by SIGINT (Ctrl-C): the run log says 'interrupted'

    def summary(self) -> str:
        return (f"work {self.queue}: {self.claimed} claimed, {self.acked} acked, {self.retried} retried, "
                f"{self.dead} dead-lettered, {self.lost} lost their lease; {self.workers} worker(s), "
                f"{self.duration_s:.2f} s" + (f", {self.crashed} worker(s) crashed" if self.crashed else ""))


class _Heartbeat:
    """Keeps the lease of the job a worker is running: a thread, with its own Source (a Source
    belongs to the thread that opened it), extends the lease every ``interval`` seconds."""

    def __init__(self, open_source: SourceOpener, path: str, queue_name: str, interval: float):
        self.open_source, self.path, self.queue_name, self.interval = open_source, path, queue_name, interval
        self.lock = threading.Lock()
        self.job: Job | None = None
        self.lost = False
        self.wake = threading.Event()
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="minikafka-work-heartbeat", daemon=True)
        self.thread.start()

    def keep(self, job: Job) -> None:
        with self.lock:
            self.job, self.lost = job, False

    def release(self) -> bool:
        """Stop keeping the job's lease; True if a heartbeat found the lease already lost."""
        with self.lock:  # waits for a heartbeat in progress
            self.job = None
            return self.lost

    def close(self) -> None:
        self.closed = True
        self.wake.set()
        self.thread.join(5)

    def _run(self) -> None:
        try:
            with self.open_source(self.path) as source:
                topic, consumer = find_queue(source, self.queue_name)
                q = source.topic(topic, source.model_of(topic), dedup=source.layout(topic).dedup or None).queue(
                    consumer)
                while not self.closed:
                    self.wake.wait(self.interval)
                    with self.lock:
                        job = self.job
                        if job is None or self.closed:
                            continue
                        mine = Job(id=job.id, data=None, attempts=job.attempts, worker_id=job.worker_id,
                                   lease_expires_at=job.lease_expires_at, _queue=q)
                        if not mine.heartbeat():
                            self.lost = True
                            self.job = None
        except Exception as exc:  # a heartbeat that cannot run must not kill the worker: leases then expire
            print(f"minikafka work: heartbeat stopped: {type(exc).__name__}: {exc}", file=sys.stderr)


def _call(handler: Callable[[Any], Any], data: Any, loop: list) -> Any:
    """Call the handler and return what it returned; an ``async def`` handler (any awaitable
    result) is run to completion on the worker's own event loop, so a job is never acked
    before its coroutine ran, and the coroutine's value is the result."""
    result = handler(data)
    if inspect.isawaitable(result):
        if not loop:
            loop.append(asyncio.new_event_loop())
        result = loop[0].run_until_complete(result)
    return result


def _worker_main(open_source: SourceOpener, path: str, queue_name: str, handler_ref: str, worker_id: str,
                 retry_delay: float, once: bool, events, parent_pid: int) -> None:
    """A worker process's body: what stops it unexpectedly is one line on stderr and exit code 1
    (the parent replaces it), never a traceback."""
    try:
        _work_jobs(open_source, path, queue_name, handler_ref, worker_id, retry_delay, once, events, parent_pid)
    except Exception as exc:
        print(f"minikafka work: worker {worker_id} stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.stderr.flush()
        raise SystemExit(1) from None
    events.put(("exit", None, None))


def _work_jobs(open_source: SourceOpener, path: str, queue_name: str, handler_ref: str, worker_id: str,
               retry_delay: float, once: bool, events, parent_pid: int) -> None:
    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True

    # the parent blocked SIGTERM/SIGINT around the fork: set our handlers, then take signals
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent stops us
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    die_with_parent(parent_pid, signal.SIGTERM)  # a killed parent stops its workers (the job in flight ends)
    handler = load_handler(handler_ref)
    loop: list = []
    with open_source(path) as source:
        topic, consumer = find_queue(source, queue_name)
        timeout, max_attempts = stored_settings(source, topic, consumer)
        model = source.model_of(topic)
        q = source.topic(topic, model, dedup=source.layout(topic).dedup or None).queue(
            consumer, visibility_timeout=timeout, max_attempts=max_attempts)
        beat = _Heartbeat(open_source, path, queue_name, max(0.05, timeout * HEARTBEAT_FRACTION))
        try:
            while not stop["now"] and os.getppid() == parent_pid:
                job = q.claim_one(worker_id)
                if job is None:
                    if once:
                        break
                    q.wait(timeout=IDLE_CHECK)
                    continue
                events.put(("claimed", job.id, None))
                beat.keep(job)
                try:
                    result = _call(handler, job.data, loop)  # the return value is the job's result (JSON)
                except Exception as exc:
                    beat.release()
                    delay = backoff_delay(retry_delay, job.attempts)
                    error = f"{type(exc).__name__}: {exc}"
                    ok = job.retry(delay=delay, error=error)
                    last = job.attempts >= (job.max_attempts or max_attempts)
                    kind = "lost" if not ok else ("dead" if last else "retried")
                    events.put((kind, job.id, error))
                else:
                    beat.release()
                    events.put(_acked(job, result))
        finally:
            beat.close()
            if loop:
                loop[0].close()


def _acked(job: Job, result: Any) -> tuple[str, int, str | None]:
    """Ack a job whose handler returned ``result``; the event for the parent.

    A result the ledger cannot store as JSON (a datetime, a set, bytes, NaN) does not make the
    job run again: the handler did its work once, so the job goes to the dead letter at once
    with the refusal as its error (``q.result`` raises ``JobFailedError`` naming it), and the
    worker goes on with the next job.
    """
    try:
        return ("acked" if job.ack(result) else "lost", job.id, None)
    except InvalidRecordError as exc:
        error = f"{type(exc).__name__}: {exc}"
        return ("dead" if job.fail(error) else "lost", job.id, error)


class _Events:
    """A worker's side of its pipe to the parent: ``put`` sends one (kind, job id, error) event."""

    def __init__(self, conn: Any):
        self.conn = conn

    def put(self, event: tuple[str, int | None, str | None]) -> None:
        self.conn.send(event)


def _dead_count(open_source: SourceOpener, path: str, queue_name: str) -> int:
    with open_source(path) as source:
        topic, consumer = find_queue(source, queue_name)
        return source.topic(topic, source.model_of(topic), dedup=source.layout(topic).dedup or None).queue(
            consumer).stats()["dead"]


def work(path: str, queue_name: str, handler_ref: str, *, concurrency: int = 1, once: bool = False,
         retry_delay: float = 60.0, progress: Callable[[WorkResult], None] | None = None,
         progress_every: float = 1.0, open_source: SourceOpener) -> WorkResult:
    """Run ``concurrency`` worker processes on a queue until stopped (or, with ``once``, until
    nothing is claimable).

    Raises:
        HandlerError: the handler cannot be imported.
        QueueNotFoundError: no such queue. LedgerError: the file cannot be opened.

    ``open_source`` opens the ledger at a path (``minikafka.Source``), here and in every worker.
    """
    limit = concurrency_limit()
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= limit:
        raise InvalidSettingError(
            f"concurrency must be an integer from 1 to {limit} (4 worker processes per CPU, never below 32 "
            f"nor above 256), got {concurrency!r}")
    if retry_delay < 0:
        raise InvalidSettingError(f"retry_delay must be >= 0 seconds, got {retry_delay}")
    load_handler(handler_ref)  # fail here, once, rather than in every worker
    result = RunResult(new_run_id("work"), "work", stage=queue_name)
    with open_source(path) as source:
        topic, consumer = find_queue(source, queue_name)
        source.model_of(topic)  # the workers must be able to import the model too
        result.consumer, result.inputs = consumer, [topic]
        result.details = {"handler": handler_ref, "concurrency": concurrency, "once": once}
        with source.ledger.atomic() as conn:  # the 'running' row; earlier ones whose process is gone: interrupted
            dead = start_run_in_current_transaction(conn, result)
        if dead:
            logging.getLogger("minikafka").warning("%s", resume_note(dead))
    # fork: the parent holds no open connection or watcher thread at this point
    ctx = multiprocessing.get_context("fork")
    parent = os.getpid()
    # one pipe per worker, written synchronously (no feeder thread): a worker that dies at any
    # instant can lose only its own last message, never jam the others' (a shared Queue can)
    channels: dict[Any, Any] = {}  # the parent's reading end -> its worker process

    def make(i: int) -> tuple[Any, Any, Any]:
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker_main, name=f"minikafka-work-{i}",
                           args=(open_source, path, queue_name, handler_ref, f"{os.uname().nodename}:{parent}:{i}",
                                 retry_delay, once, _Events(writer), parent))
        return proc, reader, writer

    out = WorkResult(result.run_id, queue_name, concurrency)
    dead_before = _dead_count(open_source, path, queue_name)
    stopping = {"now": False, "signal": None}

    started_procs: list = []

    def forward(signum, frame):
        stopping["now"] = True
        stopping["signal"] = stopping["signal"] or signum
        for p in started_procs:
            if p.exitcode is None:
                try:
                    os.kill(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def start(made: tuple[Any, Any, Any]) -> None:
        proc, reader, writer = made
        # blocked around the fork: a child takes no signal before it has set its own handlers,
        # and a stop that came while the worker was being made forks nothing (``forward`` has
        # already run, so a worker forked now would never be told to stop)
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            if stopping["now"]:
                reader.close()
                return
            proc.start()
            started_procs.append(proc)
            channels[reader] = proc
        finally:
            writer.close()  # the child holds it now: its exit is the reader's end of file
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)

    # handlers first, then the workers: a signal at any instant stops the run
    old = {s: signal.signal(s, forward) for s in _STOP_SIGNALS}
    started = time.perf_counter()
    replaced = 0

    def ended(proc) -> None:
        """A worker's pipe reached its end: it exited. One that died without stopping (a crash,
        a kill, ``os._exit``) is replaced, up to ``MAX_REPLACEMENTS`` per slot."""
        nonlocal replaced
        proc.join(10)
        if proc.exitcode in (0, None) or stopping["now"] or replaced >= MAX_REPLACEMENTS * concurrency:
            return
        replaced += 1
        print(f"minikafka work: worker {proc.name} exited with code {proc.exitcode}; replaced "
              f"(its job runs again once its lease ends)", file=sys.stderr)
        start(make(len(started_procs)))

    try:
        for i in range(concurrency):
            if stopping["now"]:
                break
            start(make(i))
        last_report = time.monotonic()
        while channels:
            for reader in mp_connection.wait(list(channels), timeout=0.2):
                try:
                    kind, _job, error = reader.recv()
                except (EOFError, OSError):
                    ended(channels.pop(reader))
                    reader.close()
                    continue
                if kind in ("claimed", "acked", "retried", "dead", "lost"):
                    setattr(out, kind, getattr(out, kind) + 1)
                    if error and len(out.errors) < 20:
                        out.errors.append(error)
            if progress and time.monotonic() - last_report >= progress_every:
                last_report = time.monotonic()
                out.duration_s = time.perf_counter() - started
                progress(out)
        out.crashed = sum(1 for p in started_procs if p.exitcode not in (0, None))
    finally:
        for p in started_procs:  # a worker that did not stop in time does not outlive the run
            if p.exitcode is None:
                p.kill()
                p.join(5)
        for reader in channels:
            reader.close()
        for s, handler in old.items():
            signal.signal(s, handler)
    out.workers = len(started_procs) - replaced
    # a job whose lease ran out and whose attempts were used up went to the dead letter at a claim
    out.dead = max(out.dead, _dead_count(open_source, path, queue_name) - dead_before)
    out.duration_s = time.perf_counter() - started
    result.rows_in, result.rows_out = out.claimed, out.acked
    result.rows_failed, result.rows_quarantined = out.retried, out.dead
    result.details = {**(result.details or {}), "lost": out.lost, "crashed_workers": out.crashed,
                      "stopped_by_signal": stopping["now"], "errors": out.errors[:5]}
    failed = out.crashed > 0
    out.interrupted = stopping["signal"] == signal.SIGINT
    if failed:
        result.finish("failed", f"{out.crashed} worker process(es) exited abnormally")
    else:
        result.finish("interrupted" if out.interrupted else "succeeded", INTERRUPTED if out.interrupted else None)
    with open_source(path) as source:
        with source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, result)
    return out

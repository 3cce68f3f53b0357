"""Worker processes for a queue: ``minikafka work MODULE:FUNCTION --queue NAME --concurrency N``.

Each worker process opens its own Source, claims one job at a time and calls the handler
with the job's model instance. A return acks the job; an exception retries it after
``retry_delay * 2**(attempts-1)`` seconds (the dead letter once attempts are used up).
SIGTERM (or SIGINT) lets the job in flight finish, then the worker exits. The parent
gathers progress from the workers and writes one run-log row for the whole run.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import queue as stdlib_queue
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import HandlerError
from ...ledger.runlog import INTERRUPTED, RunResult, new_run_id, write_run_in_current_transaction
from .queues import find_queue, stored_settings

if TYPE_CHECKING:
    from ..core.handles import SourceOpener

IDLE_CHECK = 0.5  # seconds between looks at the stop flag while idle


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
class WorkResult:
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


def _worker_main(open_source: SourceOpener, path: str, queue_name: str, handler_ref: str, worker_id: str,
                 retry_delay: float, once: bool, events) -> None:
    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    handler = load_handler(handler_ref)
    with open_source(path) as source:
        topic, consumer = find_queue(source, queue_name)
        timeout, max_attempts = stored_settings(source, topic, consumer)
        model = source.model_of(topic)
        q = source.topic(topic, model, dedup=source.layout(topic).dedup or None).queue(
            consumer, visibility_timeout=timeout, max_attempts=max_attempts)
        while not stop["now"]:
            job = q.claim_one(worker_id)
            if job is None:
                if once:
                    break
                q.wait(timeout=IDLE_CHECK)
                continue
            events.put(("claimed", job.id, None))
            try:
                acked = job.ack(handler(job.data))  # the return value is the job's result (JSON)
            except Exception as exc:
                delay = backoff_delay(retry_delay, job.attempts)
                error = f"{type(exc).__name__}: {exc}"
                ok = job.retry(delay=delay, error=error)
                kind = "lost" if not ok else ("dead" if job.attempts >= max_attempts else "retried")
                events.put((kind, job.id, error))
            else:
                events.put(("acked" if acked else "lost", job.id, None))
    events.put(("exit", None, None))


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
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if retry_delay < 0:
        raise ValueError(f"retry_delay must be >= 0 seconds, got {retry_delay}")
    load_handler(handler_ref)  # fail here, once, rather than in every worker
    result = RunResult(new_run_id("work"), "work", stage=queue_name)
    with open_source(path) as source:
        topic, consumer = find_queue(source, queue_name)
        source.model_of(topic)  # the workers must be able to import the model too
        result.consumer, result.inputs = consumer, [topic]
        result.details = {"handler": handler_ref, "concurrency": concurrency, "once": once}
        with source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, result)
    # fork: the parent holds no open connection or watcher thread at this point
    ctx = multiprocessing.get_context("fork")
    events = ctx.Queue()
    procs = [ctx.Process(target=_worker_main, name=f"minikafka-work-{i}",
                         args=(open_source, path, queue_name, handler_ref, f"{os.uname().nodename}:{os.getpid()}:{i}",
                               retry_delay, once, events))
             for i in range(concurrency)]
    out = WorkResult(result.run_id, queue_name, concurrency)
    stopping = {"now": False, "signal": None}

    def forward(signum, frame):
        stopping["now"] = True
        stopping["signal"] = stopping["signal"] or signum
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGTERM)

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    started = time.perf_counter()
    try:
        for p in procs:
            p.start()
        exited, last_report = 0, time.monotonic()
        while exited < concurrency:
            try:
                kind, _job, error = events.get(timeout=0.2)
            except stdlib_queue.Empty:
                if all(not p.is_alive() for p in procs):
                    break
            else:
                if kind == "exit":
                    exited += 1
                elif kind in ("claimed", "acked", "retried", "dead", "lost"):
                    setattr(out, kind, getattr(out, kind) + 1)
                    if error and len(out.errors) < 20:
                        out.errors.append(error)
            if progress and time.monotonic() - last_report >= progress_every:
                last_report = time.monotonic()
                out.duration_s = time.perf_counter() - started
                progress(out)
        for p in procs:
            p.join(10)
        while True:  # events a worker sent just before it exited
            try:
                kind, _job, error = events.get_nowait()
            except stdlib_queue.Empty:
                break
            if kind in ("claimed", "acked", "retried", "dead", "lost"):
                setattr(out, kind, getattr(out, kind) + 1)
        out.crashed = sum(1 for p in procs if p.exitcode not in (0, None))
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
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

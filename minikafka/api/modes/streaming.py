"""The streaming runner: minibatch's model on the ledger (the ``Stream`` object is ``api.streams``).

``source.streaming(name, size=N | interval=s [, relaxed=False] | emitter=Cls, ...)``
delivers windows of a stream (or of any typed topic) to a function:

1. a window is decided and **stored** (id, row range, time range) before the function
   runs, in one transaction;
2. the function runs (here, or in one of ``workers`` processes);
3. the window commits in one transaction that acks exactly its rows for the consumer,
   writes the function's output when the sink is a topic, and marks it committed.

A crash or an exception between 1 and 3 offers the same window again (same id, same
rows); a committed window is never offered again. Windows commit in id order, also
with several workers. External sinks (MQTT, HTTP) get the output before the commit:
at-least-once, keyed by window.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from ...errors import StreamingConfigError, WindowFailedError
from ...ledger.consuming import (
    RunResult,
    new_run_id,
    resume_note,
    start_run_in_current_transaction,
    write_run_in_current_transaction,
)
from ...ledger.consuming import windows as stored
from ...ledger.topics import acks, validate_consumer_name
from ...ledger.transactions import ConcurrentRunError
from ...util.clock import parse_timestamp, utc_now
from ...util.faults import checkpoint
from ..core.rows import TopicRows, stream_data
from . import retention
from .attach import reopen
from .windows import DecisionContext, Window, WindowEmitter

if TYPE_CHECKING:
    from ..core.handles import SourceHandle, TopicHandle

log = logging.getLogger("minikafka.streams")


# -- the streaming consumer -------------------------------------------------------------
_WORKER_FN: Callable | None = None


def _set_worker_fn(fn: Callable) -> None:
    global _WORKER_FN
    _WORKER_FN = fn
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop


def _call_in_worker(window: Window) -> Any:
    return _WORKER_FN(window)


def _messages(result: Any) -> list[Any]:
    if result is None:
        return []
    if isinstance(result, (list, tuple)):
        return [m for m in result if m is not None]
    return [result]


class StreamingConsumer:
    """A running (or finished) ``streaming()`` loop.

    Attributes:
        consumer: the consumer name.
        windows_committed: windows committed by this loop.
        rows: input rows in those windows.
        run_id: this loop's row in the run log (kind "stream").
        error: the exception that ended a background loop, or None.
        created_stream: True when ``streaming()`` found no topic or stream of that name
            and created an empty stream for it.
    """

    def __init__(self, topic: TopicHandle, fn: Callable, emitter: WindowEmitter, *, consumer: str, workers: int,
                 sink: Any, until_idle: bool, max_attempts: int | None, retry_delay: float, poll: float,
                 open_topic: Callable[[Any, str], TopicHandle], forward_on_none: bool = False):
        self.topic = topic
        self.forward_on_none = forward_on_none  # fn returned None: the window's rows go to the sink
        self.open_topic = open_topic  # (source, name) -> the topic or stream, opened or created
        self.fn = fn
        self.emitter = emitter
        self.consumer = consumer
        self.workers = workers
        self.sink = sink
        self.until_idle = until_idle
        self.max_attempts = max_attempts if max_attempts is not None else (3 if until_idle else None)
        self.retry_delay = retry_delay
        self.poll = poll
        self.windows_committed = 0
        self.rows = 0
        self.rows_out = 0
        self.run_id = new_run_id(f"stream-{consumer}")
        self.error: BaseException | None = None
        self.created_stream = False  # True when streaming() created ``topic`` as an empty stream
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: ProcessPoolExecutor | None = None
        self._pool_size = 0
        self._results: dict[int, Any] = {}
        self._next_retention = 0.0

    def __repr__(self) -> str:
        return (f"StreamingConsumer({self.consumer!r} on {self.topic.name!r}, "
                f"windows={self.windows_committed}, rows={self.rows})")

    # -- control --------------------------------------------------------------------
    def stop(self, timeout: float | None = 30.0) -> None:
        """Finish the windows in flight (their commits included), then stop; waits for a background loop."""
        self._stop.set()
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> StreamingConsumer:
        """Run the loop in a background thread on its own Source of the same file."""
        if self.topic.source.path == ":memory:":
            raise StreamingConfigError(
                "blocking=False runs the loop in a background thread, which cannot share a ':memory:' ledger: "
                "use a file Source")
        self._thread = threading.Thread(target=self._thread_main, name=f"minikafka-streaming-{self.consumer}",
                                        daemon=True)
        self._thread.start()
        return self

    def _thread_main(self) -> None:
        try:
            with type(self.topic.source)(self.topic.source.path) as source:
                self.topic = reopen(self.topic, source)
                self.emitter.topic = self.topic
                self._loop()
        except BaseException as exc:  # kept on the handle: a thread has no caller to raise to
            self.error = exc
            log.error("streaming consumer %r stopped: %s", self.consumer, exc)

    def run(self) -> StreamingConsumer:
        """Run the loop here until stopped (or idle, with until_idle); SIGTERM stops it cleanly."""
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, lambda *_: self._stop.set())
        try:
            self._loop()
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        return self

    # -- the loop -------------------------------------------------------------------
    def _loop(self) -> None:
        source = self.topic.source
        ledger = source.ledger
        now = utc_now()
        with ledger.atomic() as conn:
            self.consumer_id = acks.register_consumer_in_current_transaction(conn, self.topic.name, self.consumer, now)
        self.run = RunResult(self.run_id, "stream", stage=self.consumer, consumer=self.consumer,
                             inputs=[self.topic.name], outputs=self._sink_outputs(),
                             details={"kind": self.emitter.kind, "workers": self.workers, "windows": 0})
        with ledger.atomic() as conn:  # the 'running' row; earlier ones whose process is gone: interrupted
            dead = start_run_in_current_transaction(conn, self.run)
        if dead:
            log.warning("%s", resume_note(dead))
        try:
            while not self._stop.is_set():
                self._maybe_retention()
                mark = self._mark()  # before reading: a commit after it wakes the wait below
                batch = self._next_batch()
                if not batch:
                    if self.until_idle:
                        break
                    self._wait(mark)
                    continue
                failed = self._process(batch)
                if failed is not None:
                    self._after_failure(*failed)
            self.run.finish("succeeded")
        except BaseException as exc:
            self.run.finish("failed", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
            try:
                self._write_run()
            except Exception:  # the loop's own error matters more than its log row
                pass

    def _watcher(self):
        # the Source's commit watcher (PRAGMA data_version) where the ledger has one
        return getattr(self.topic.source, "watcher", None) if self.topic.source.path != ":memory:" else None

    def _mark(self):
        watcher = self._watcher()
        return watcher.mark() if watcher is not None else None

    def _wait(self, mark) -> None:
        """Until a commit (by any process) or ``poll`` seconds: time windows need the timeout."""
        watcher = self._watcher()
        if watcher is not None and mark is not None:
            watcher.wait(mark, self.poll)
        else:
            self._stop.wait(self.poll)

    def _sink_outputs(self) -> list[str]:
        target = _sink_topic_name(self.sink)
        return [target] if target else []

    def _write_run(self) -> None:
        self.run.rows_in, self.run.rows_out = self.rows, self.rows_out
        self.run.details["windows"] = self.windows_committed
        with self.topic.source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, self.run)

    def _maybe_retention(self) -> None:
        if time.monotonic() < self._next_retention:
            return
        self._next_retention = time.monotonic() + 60.0
        ledger = self.topic.source.ledger
        if retention.retention_of(ledger, self.topic.name) is not None:
            retention.apply_retention(ledger, [self.topic.name])

    def _next_batch(self) -> list[stored.StoredWindow]:
        """Open windows first (offered again), then newly decided ones, up to ``workers``."""
        ledger = self.topic.source.ledger
        with ledger.atomic() as conn:
            batch = stored.open_windows(conn, self.consumer_id)
            want = max(1, self.workers)
            if len(batch) >= want:
                return batch[:want]
            last = stored.last_window(conn, self.consumer_id)
            now = utc_now()
            while len(batch) < want:
                floor = max([w.last_offset for w in batch], default=0)
                ctx = DecisionContext(self.topic, self.consumer, self.consumer_id, floor, last)
                plan = self.emitter.plan(ctx)
                if plan is None:
                    break
                window = stored.StoredWindow((last.window_id if last else 0) + 1, self.emitter.kind,
                                             plan.first_offset, plan.last_offset, plan.rows, plan.row_ids,
                                             plan.start, plan.end, "open")
                stored.store_window_in_current_transaction(conn, self.consumer_id, window, now)
                batch.append(window)
                last = window
        return batch

    def _materialise(self, window: stored.StoredWindow) -> Window:
        topic = self.topic
        rows = stored.window_rows(topic.source.ledger.conn, topic.layout, self.consumer_id, window)
        consumer = self.consumer
        return Window(window.window_id, consumer, topic.name, window.kind, parse_timestamp(window.start),
                      parse_timestamp(window.end), window.first_offset, window.last_offset, None, window.attempts,
                      rows=rows, make_record=lambda r: topic.rows.record(r, consumer, "new"),
                      make_data=stream_data if topic.rows.is_stream else None)

    def _process(self, batch: list[stored.StoredWindow]) -> tuple | None:
        """Run the batch's functions, then commit in id order; returns (window, error) of the first failure."""
        windows = [self._materialise(w) for w in batch]
        outcomes: dict[int, tuple[bool, Any]] = {}
        todo = [w for w in windows if w.id not in self._results]
        if self.workers > 1 and len(todo) > 1:
            outcomes.update(self._run_parallel(todo))
        else:
            for w in todo:
                if w is not todo[0] and outcomes and not all(ok for ok, _ in outcomes.values()):
                    break
                checkpoint("stream:before-function")
                try:
                    outcomes[w.id] = (True, self.fn(w))
                except Exception as exc:
                    outcomes[w.id] = (False, exc)
        for stored_window, w in zip(batch, windows):
            if w.id in self._results:
                ok, result = True, self._results.pop(w.id)
            elif w.id in outcomes:
                ok, result = outcomes[w.id]
            else:
                return None
            if not ok:
                for later in windows:  # keep what later windows computed for their own commit
                    if later.id > w.id and outcomes.get(later.id, (False,))[0]:
                        self._results[later.id] = outcomes[later.id][1]
                return stored_window, w, result
            try:
                self._commit(stored_window, w, result)
            except Exception as exc:  # a sink or output that cannot be written fails the window
                if isinstance(exc, ConcurrentRunError):
                    raise
                for later in windows:
                    if later.id > w.id and outcomes.get(later.id, (False,))[0]:
                        self._results[later.id] = outcomes[later.id][1]
                return stored_window, w, exc
        return None

    def _run_parallel(self, windows: list[Window]) -> dict[int, tuple[bool, Any]]:
        # processes start as windows need them: a fork pool starts all its workers at once, so it
        # is sized by the windows at hand (at most ``workers``) and grows when more windows come
        need = min(self.workers, len(windows))
        if self._pool is not None and self._pool_size < need:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._pool is None:
            ctx = multiprocessing.get_context("fork")
            self._pool = ProcessPoolExecutor(max_workers=need, mp_context=ctx,
                                             initializer=_set_worker_fn, initargs=(self.fn,))
            self._pool_size = need
        futures = {w.id: self._pool.submit(_call_in_worker, w) for w in windows}
        out: dict[int, tuple[bool, Any]] = {}
        for wid, future in futures.items():
            try:
                out[wid] = (True, future.result())
            except BrokenProcessPool as exc:
                out[wid] = (False, exc)
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
                break
            except Exception as exc:
                out[wid] = (False, exc)
        return out

    def _commit(self, stored_window: stored.StoredWindow, window: Window, result: Any) -> None:
        # minibatch's forward(window.data): a function returning None passes its window through
        messages = list(window.data) if result is None and self.forward_on_none else _messages(result)
        source = self.topic.source
        writer = None
        if self.sink is not None:
            if is_topic(self.sink) or hasattr(self.sink, "write_in_current_transaction"):
                writer = _TopicWriter(source, self.sink, messages, self.open_topic)
            else:
                key = f"{self.consumer}/{self.topic.name}/window-{window.id}/{window.first_offset}-{window.last_offset}"
                _deliver(self.sink, messages, key)
        checkpoint("stream:before-commit")
        now = utc_now()
        with source.ledger.atomic() as conn:
            if not stored.commit_window_in_current_transaction(conn, self.topic.name, self.consumer_id,
                                                               stored_window, self.run_id, now):
                raise ConcurrentRunError(
                    f"window {window.id} of consumer {self.consumer!r} was committed by another process; "
                    "run one streaming loop per consumer")
            if writer is not None:
                self.rows_out += writer.write(self.run_id)
            self.windows_committed += 1
            self.rows += len(window)
            self.run.rows_in, self.run.rows_out = self.rows, self.rows_out
            self.run.details["windows"] = self.windows_committed
            self.run.details["last_window"] = window.id
            write_run_in_current_transaction(conn, self.run)
            checkpoint("stream:inside-commit")

    def _after_failure(self, stored_window: stored.StoredWindow, window: Window, error: BaseException) -> None:
        text = f"{type(error).__name__}: {error}"
        with self.topic.source.ledger.atomic() as conn:
            attempts = stored.record_failure_in_current_transaction(conn, self.consumer_id, window.id, text)
        log.warning("window %s of consumer %r failed (attempt %s): %s", window.id, self.consumer, attempts, text)
        if self.max_attempts is not None and attempts >= self.max_attempts:
            raise WindowFailedError(
                f"window {window.id} of consumer {self.consumer!r} failed {attempts} time(s), last: {text}; "
                "it stays open and is offered again next run", consumer=self.consumer, window_id=window.id,
                attempts=attempts) from error
        delay = min(60.0, self.retry_delay * 2 ** (attempts - 1)) if self.retry_delay else 0.0
        if delay:
            self._stop.wait(delay)


def is_topic(sink: Any) -> bool:
    """A Topic or Stream (something with ``rows``) rather than an outside sink."""
    return isinstance(getattr(sink, "rows", None), TopicRows)


def _sink_topic_name(sink: Any) -> str | None:
    if is_topic(sink):
        return sink.name
    target = getattr(sink, "topic", None)
    if hasattr(sink, "write_in_current_transaction"):
        return target if isinstance(target, str) else getattr(target, "name", None)
    return None


class _TopicWriter:
    """Validates a window's output for a topic sink, then writes it inside the window's commit."""

    def __init__(self, source: SourceHandle, sink: Any, messages: list[Any],
                 open_topic: Callable[[Any, str], TopicHandle]):
        name = _sink_topic_name(sink)
        target = sink if is_topic(sink) and sink.source is source else open_topic(source, name)
        self.target: TopicRows = target.rows
        self.models = [self.target.validate(m) for m in messages]

    def write(self, run_id: str) -> int:
        written = 0
        for model in self.models:
            if self.target.insert_one_in_current_transaction(model, run_id=run_id,
                                                             ignore_duplicates=bool(self.target.dedup)):
                written += 1
        return written


def _deliver(sink: Any, messages: list[Any], key: str) -> None:
    if not messages:
        return
    put_many = getattr(sink, "put_many", None)
    if callable(put_many):
        put_many(messages, key=key)
        return
    put = getattr(sink, "put", None)
    if not callable(put):
        raise StreamingConfigError(f"sink= takes a Topic or an object with put(message), got {sink!r}")
    for message in messages:
        put(message)


def consumer_name(func: Any, consumer: str | None) -> str:
    """The consumer's name: ``consumer``, else the function's name.

    Raises:
        StreamingConfigError: ``func`` is not callable, or has no usable name and no consumer= was given.
        InvalidNameError: the name is not a valid consumer name.
    """
    if not callable(func):
        raise StreamingConfigError(f"streaming() decorates a function, got {func!r}")
    name = consumer or getattr(func, "__name__", None)
    if not name or name == "<lambda>":
        raise StreamingConfigError("the function has no usable name: pass consumer='name'")
    return validate_consumer_name(name)

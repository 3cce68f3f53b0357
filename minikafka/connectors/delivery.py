"""The HTTP delivery worker: POST each partition's pending rows to an endpoint, commit on 2xx.

A deliveries file (or the ``[[deliveries]]`` tables of a pipeline file)::

    source = "data/shop.sqlite"            # the ledger, relative to this file
                                           # (a pipeline file uses [pipeline].source)
    [[deliveries]]
    name = "order-processors"              # the consumer group
    topic = "orders"
    partitions = [0, 1]                    # default: every partition of the topic
    endpoint = "https://api.example.com/process-orders"
    batch_size = 50                        # rows per POST
    interval = "5s"                        # poll when idle, first retry delay (ms, s, m, h, d)
    timeout = "10s"                        # per request
    max_attempts = 0                       # 0: retry forever; N: then quarantine the batch
    max_backoff = "1m"                     # cap of the exponential backoff
    headers = { Authorization = "Bearer ${ORDERS_TOKEN}" }   # ${VAR} from the environment

Each (group, partition) runs in its own thread with its own connection, in offset
order: take the partition's lease, fetch a batch, record it as in flight, POST
``{"topic", "partition", "messages": [{"offset", "data", "created"}]}`` with an
``Idempotency-Key`` of group, topic, partition and first-last offsets; a 2xx commits the
batch and clears the in-flight row in one transaction. Anything else (non-2xx, timeout,
refused) retries the same batch with exponential backoff and jitter, capped; with
``max_attempts`` N the batch's rows go to the quarantine with the last status and body
excerpt after N failed attempts, and delivery moves on (``minikafka quarantine TOPIC
requeue`` makes them pending for the group again). A worker that was killed re-sends
exactly the batch in flight (same key) before taking new rows. The state (batch in
flight, leases) lives in ``ledger/consuming/deliveries.py``.

One worker delivers a partition at a time: a second ``deliver`` on the same group (a
cron overlap, one started by mistake) waits for the partition's lease, or with
``--once`` skips the partition and says so; the lease of a worker that died is taken
over (at once when it ran on this host, else when it expires). A repeat after a crash
or a takeover re-sends the batch in flight, so it always carries the same key.

Header values are resolved once and never printed, logged or stored: a value HTTP
cannot carry (a stray CR or LF) is refused before anything is sent, naming the header
only, and any error text or answer body quoting a value has it masked. Endpoints are
shown without user info or query.

``once=True`` delivers what is pending and returns. A batch that keeps failing with
``max_attempts = 0`` gets at least three tries and more until its backoff has grown to
``max_backoff``; then the run reports it (the CLI exits 1) and it stays pending.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..api.modes.groups import _field_dicts
from ..api.source import Source
from ..errors import DeliveryConfigError, DeliveryError, InvalidDurationError, MinikafkaError, TopicNotFoundError
from ..ledger.consuming import (
    RunResult,
    new_run_id,
    resume_note,
    start_run_in_current_transaction,
    write_run_in_current_transaction,
)
from ..ledger.consuming import deliveries as state
from ..ledger.topics import TopicLayout, acks
from ..util import clock
from ..util.clock import utc_now
from ..util.duration import parse_duration
from ..util.redact import cut, redact_and_cut, redact_secrets, url_secrets
from ..util.results import Result
from ..util.tomlfile import read_toml
from .http import (
    Backoff,
    HttpPoster,
    check_endpoint,
    check_header,
    idempotency_key,
    redact_url,
    to_json_bytes,
)

log = logging.getLogger("minikafka.connectors")

DELIVERY_KEYS = {"name", "topic", "partitions", "endpoint", "batch_size", "interval", "timeout", "max_attempts",
                 "max_backoff", "headers", "description"}
# a deliveries file, or a pipeline file with [[deliveries]] (every table a pipeline file may hold)
TOP_KEYS = {"source", "deliveries", "pipeline", "spark", "engine", "topics", "tables", "stages", "queues", "health",
            "lake", "lineage"}
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# --once with max_attempts = 0 (retry forever) must still end: a failing batch gets at
# least this many tries in the run, and more until its backoff has grown to max_backoff;
# then the run reports it (exit 1) and the batch stays pending for the next run.
ONCE_MIN_ATTEMPTS = 3


LEASE_SECONDS = 15.0  # a partition's lease; renewed every third of it while the worker runs
STANDBY_POLL = 0.5  # how often a worker waiting for a partition's lease asks for it


def _duration(path: Path, where: str, key: str, value: Any) -> float:
    try:
        return parse_duration(value, what=f"key {key!r}")
    except InvalidDurationError as exc:
        raise _fail(path, where, str(exc)) from None


@dataclass
class DeliverySpec:
    """One delivery: a consumer group posting a topic's partitions to one endpoint."""

    name: str
    topic: str
    endpoint: str
    partitions: list[int] | None = None
    batch_size: int = 100
    interval: float = 1.0
    timeout: float = 10.0
    max_attempts: int = 0
    max_backoff: float = 60.0
    headers: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # header values may hold secrets
        return (f"DeliverySpec({self.name!r}, topic={self.topic!r}, endpoint={redact_url(self.endpoint)!r}, "
                f"partitions={self.partitions!r}, headers={sorted(self.headers)!r})")

    def resolved_headers(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """Header values with ``${VAR}`` replaced from the environment.

        Raises:
            DeliveryConfigError: a variable is not set (the message names it, never a value).
        """
        env = os.environ if environ is None else environ
        out = {}
        for name, template in self.headers.items():
            missing = [v for v in ENV_REF.findall(template) if v not in env]
            if missing:
                raise DeliveryConfigError(
                    f"delivery {self.name!r}: header {name!r} uses ${{{missing[0]}}}, which is not set in the environment")
            out[name] = ENV_REF.sub(lambda m: env[m.group(1)], template)
        return out


@dataclass
class DeliveryFile:
    path: Path
    source: Path | None
    deliveries: list[DeliverySpec]


def _fail(path: Path, where: str, message: str) -> DeliveryConfigError:
    return DeliveryConfigError(f"{path}: {where}: {message}")


def _positive_int(path: Path, where: str, value: Any, *, zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        raise _fail(path, where, f"must be an integer >= {0 if zero else 1}, got {value!r}")
    return value


def parse_delivery(path: Path, index: int, spec: Any) -> DeliverySpec:
    """One ``[[deliveries]]`` table, checked; errors name the file, the delivery and the key."""
    from ..ledger.topics import validate_consumer_name, validate_topic_name

    where = f"delivery #{index + 1}"
    if not isinstance(spec, dict):
        raise _fail(path, where, "must be a table")
    if "name" in spec:
        where = f"delivery {spec['name']!r}"
    unknown = sorted(set(spec) - DELIVERY_KEYS)
    if unknown:
        raise _fail(path, where, f"unknown key(s) {unknown}; expected {sorted(DELIVERY_KEYS)}")
    for key in ("name", "topic", "endpoint"):
        if key not in spec:
            raise _fail(path, where, f"missing key {key!r}")
    try:
        validate_consumer_name(spec["name"])
        validate_topic_name(spec["topic"])
    except MinikafkaError as exc:
        raise _fail(path, where, str(exc)) from exc
    endpoint = spec["endpoint"]
    if not isinstance(endpoint, str) or not re.match(r"^https?://[^/\s]+", endpoint):
        shown = redact_url(endpoint) if isinstance(endpoint, str) else endpoint
        raise _fail(path, f"{where}, key 'endpoint'", f"must be an http:// or https:// URL, got {shown!r}")
    try:
        check_endpoint(endpoint)
    except ValueError as exc:
        raise _fail(path, f"{where}, key 'endpoint'", str(exc)) from None
    partitions = spec.get("partitions")
    if partitions is not None:
        if not isinstance(partitions, list) or not partitions or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions):
            raise _fail(path, f"{where}, key 'partitions'", f"must be a non-empty list of partition numbers, got {partitions!r}")
        partitions = sorted(set(partitions))
    headers = spec.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise _fail(path, f"{where}, key 'headers'", "must be a table of header names to text values")
    for name, value in headers.items():
        try:  # the value as written (a ${VAR} is checked once resolved, before delivery starts)
            check_header(name, ENV_REF.sub("x", value))
        except ValueError as exc:
            raise _fail(path, f"{where}, key 'headers'", str(exc)) from None
    return DeliverySpec(
        name=spec["name"], topic=spec["topic"], endpoint=endpoint, partitions=partitions,
        batch_size=_positive_int(path, f"{where}, key 'batch_size'", spec.get("batch_size", 100)),
        interval=_duration(path, where, "interval", spec.get("interval", "1s")),
        timeout=_duration(path, where, "timeout", spec.get("timeout", "10s")),
        max_attempts=_positive_int(path, f"{where}, key 'max_attempts'", spec.get("max_attempts", 0), zero=True),
        max_backoff=_duration(path, where, "max_backoff", spec.get("max_backoff", "1m")),
        headers=dict(headers),
    )


def load_deliveries(path: str | Path) -> DeliveryFile:
    """Parse a deliveries file or the ``[[deliveries]]`` of a pipeline file.

    Raises:
        DeliveryConfigError: unreadable TOML, unknown keys, a bad interval (NaN, infinite,
            negative, unreadable), a missing or malformed endpoint (a port out of range),
            a header that cannot be sent, a source that is not a path, duplicate
            deliveries of one group and topic, no deliveries. One line, naming the key.
    """
    path = Path(path)
    raw = read_toml(path, DeliveryConfigError, "deliveries file")
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        raise _fail(path, "top level", f"unknown key(s) {unknown}; expected {sorted(TOP_KEYS)}")
    pipeline = raw.get("pipeline") or {}
    source = raw.get("source", pipeline.get("source") if isinstance(pipeline, dict) else None)
    if source is not None and (not isinstance(source, str) or not source.strip()):
        key = "source" if "source" in raw else "[pipeline].source"
        raise _fail(path, f"key {key!r}", f"must be the ledger's path as text, got {source!r}")
    specs = raw.get("deliveries")
    if not isinstance(specs, list) or not specs:
        raise _fail(path, "[[deliveries]]", "no deliveries defined")
    deliveries = [parse_delivery(path, i, spec) for i, spec in enumerate(specs)]
    seen = set()
    for d in deliveries:
        if (d.name, d.topic) in seen:
            raise _fail(path, f"delivery {d.name!r}", f"delivers topic {d.topic!r} twice under one group")
        seen.add((d.name, d.topic))
    return DeliveryFile(path.resolve(), (path.parent / source).resolve() if source else None, deliveries)


@dataclass
class PartitionStats(Result):
    """What one partition's delivery did in this run."""

    group: str
    topic: str
    partition: int
    delivered: int = 0
    batches: int = 0
    failed_attempts: int = 0
    quarantined: int = 0
    committed: int = 0
    lag: int = 0
    error: str | None = None
    held_by: str | None = None  # --once found another worker delivering the partition
    leases_lost: int = 0  # batches another worker took over (this one committed nothing of them)

    def line(self) -> str:
        return self.summary()

    def summary(self) -> str:
        text = (f"group {self.group} topic {self.topic} partition {self.partition}: delivered {self.delivered} "
                f"in {self.batches} batch(es), {self.failed_attempts} failed attempt(s), "
                f"{self.quarantined} quarantined, committed offset {self.committed}, lag {self.lag}")
        if self.held_by:
            text += f"; skipped: another worker delivers it ({self.held_by})"
        if self.leases_lost:
            text += f"; {self.leases_lost} batch(es) left to the worker that took the partition over"
        return text + (f"; stopped: {self.error}" if self.error else "")


@dataclass
class DeliverySummary(Result):
    """The outcome of one ``DeliveryWorker.run()``."""

    partitions: list[PartitionStats]
    run_ids: list[str]
    seconds: float

    @property
    def delivered(self) -> int:
        return sum(p.delivered for p in self.partitions)

    @property
    def quarantined(self) -> int:
        return sum(p.quarantined for p in self.partitions)

    @property
    def errors(self) -> list[str]:
        return [f"group {p.group} topic {p.topic} partition {p.partition}: {p.error}"
                for p in self.partitions if p.error]

    def lines(self) -> list[str]:
        rate = self.delivered / self.seconds if self.seconds else 0.0
        return [p.line() for p in self.partitions] + [
            f"delivered {self.delivered} message(s), quarantined {self.quarantined}, in {self.seconds:.2f} s "
            f"({rate:,.0f} msg/s)"]

    def summary(self) -> str:
        return "\n".join(self.lines())


class DeliveryWorker:
    """Deliver the given specs from the ledger at ``source_path`` (see the module docstring).

    One worker at a time delivers a group's partition: the worker takes the partition's
    lease in the ledger (``ledger/consuming/deliveries.py``) before it fetches, a background thread
    renews its leases every third of ``lease_seconds``, and it gives them up when it
    stops. A second worker on the same group waits for the lease (with ``once``: skips
    the partition and says so). A lease whose holder died is taken over at once when the
    holder was a process on this host, else when it expires.

    Args:
        once: deliver what is pending and return (for cron); otherwise run until ``stop()``.
        progress: called with a progress line every ``progress_every`` seconds (None: quiet).
        rng: the jitter's random source (tests pass a seeded one).
        lease_seconds: how long a partition's lease lasts without renewal.
    """

    def __init__(self, source_path: str, specs: list[DeliverySpec], *, once: bool = False,
                 progress: Callable[[str], None] | None = None, progress_every: float = 2.0,
                 rng: random.Random | None = None, environ: dict[str, str] | None = None,
                 lease_seconds: float = LEASE_SECONDS):
        self.source_path = str(source_path)
        self.specs = list(specs)
        self.once = once
        self.progress = progress
        self.progress_every = parse_duration(progress_every, what="progress_every")
        self.rng = rng or random.Random()
        self.environ = environ
        self.lease_ms = int(parse_duration(lease_seconds, what="lease_seconds") * 1000)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._secrets: list[str] = []

    def __repr__(self) -> str:
        return f"DeliveryWorker({self.source_path!r}, {self.specs!r}, once={self.once})"

    def stop(self) -> None:
        """Finish the batch in flight in every partition, commit it, and return from ``run()``."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- the run ------------------------------------------------------------------------
    def _plan(self, source: Source) -> list[tuple[DeliverySpec, dict[str, str], TopicLayout, list[int]]]:
        plan = []
        for spec in self.specs:
            try:
                layout = source.layout(spec.topic)
            except TopicNotFoundError as exc:
                raise DeliveryError(f"delivery {spec.name!r}: {exc}") from exc
            parts = list(range(layout.partitions)) if spec.partitions is None else spec.partitions
            for p in parts:
                try:
                    layout.check_partition(p)
                except MinikafkaError as exc:
                    raise DeliveryError(f"delivery {spec.name!r}: {exc}") from exc
            headers = spec.resolved_headers(self.environ)
            self._secrets += list(headers.values()) + url_secrets(spec.endpoint)
            try:  # checks the URL, the timeout and the resolved headers before any thread starts
                HttpPoster(spec.endpoint, headers=headers, timeout=spec.timeout).close()
            except ValueError as exc:
                raise DeliveryConfigError(f"delivery {spec.name!r}: {self._redact(str(exc))}") from None
            plan.append((spec, headers, layout, parts))
        return plan

    def _redact(self, text: str) -> str:
        return redact_secrets(text, self._secrets)

    def run(self) -> DeliverySummary:
        """Deliver; returns the summary (also written to the run log, one row per delivery).

        Raises:
            DeliveryError: a topic or partition does not exist (nothing is delivered).
            DeliveryConfigError: a header's environment variable is not set, or its value
                cannot be sent (the message names the header, never its value).
        """
        t0 = time.perf_counter()
        with Source(self.source_path) as source:
            plan = self._plan(source)
            runs = {}
            with source.ledger.atomic() as conn:
                for spec, _h, _layout, parts in plan:
                    run = RunResult(new_run_id("deliver"), "delivery", stage=f"deliver:{spec.name}", consumer=spec.name,
                                    inputs=[spec.topic], outputs=[redact_url(spec.endpoint)],
                                    details={"endpoint": redact_url(spec.endpoint), "partitions": parts,
                                             "batch_size": spec.batch_size, "once": self.once})
                    runs[spec.name, spec.topic] = run
                    dead = start_run_in_current_transaction(conn, run)  # earlier rows whose process is gone
                    if dead:
                        log.warning("%s", resume_note(dead))
                    acks.register_group_in_current_transaction(conn, spec.topic, spec.name, utc_now())
        stats = [PartitionStats(spec.name, spec.topic, p) for spec, _h, _l, parts in plan for p in parts]
        threads = []
        it = iter(stats)
        done = threading.Event()
        heartbeat = threading.Thread(target=self._heartbeat, args=(done,), name="deliver-leases", daemon=True)
        heartbeat.start()
        try:
            for spec, headers, layout, parts in plan:
                for p in parts:
                    st = next(it)
                    t = threading.Thread(target=self._guarded, args=(spec, headers, layout, p, st),
                                         name=f"deliver-{spec.name}-{p}", daemon=True)
                    threads.append(t)
                    t.start()
            next_report = time.monotonic() + self.progress_every
            while True:
                alive = [t for t in threads if t.is_alive()]
                if not alive:
                    break
                alive[0].join(timeout=0.1)  # short waits: signal handlers run on this thread
                if self.progress and time.monotonic() >= next_report:
                    next_report = time.monotonic() + self.progress_every
                    with self._lock:
                        delivered = sum(s.delivered for s in stats)
                        failed = sum(s.failed_attempts for s in stats)
                        quarantined = sum(s.quarantined for s in stats)
                    self.progress(f"deliver: {delivered} delivered, {failed} failed attempt(s), "
                                  f"{quarantined} quarantined"
                                  + (" (stopping after the batches in flight)" if self.stopping else ""))
        finally:
            done.set()
            heartbeat.join(timeout=10)
        summary = DeliverySummary(stats, [r.run_id for r in runs.values()], time.perf_counter() - t0)
        self._finish(runs, stats)
        return summary

    def _now_ms(self) -> int:
        return int(clock.now().timestamp() * 1000)

    def _heartbeat(self, done: threading.Event) -> None:
        """Renew this worker's leases every third of their length; give them up at the end."""
        with Source(self.source_path) as source:
            ledger = source.ledger
            while not done.wait(self.lease_ms / 3000):
                try:
                    with ledger.relaxed_sync(), ledger.atomic() as conn:
                        state.renew_leases_in_current_transaction(conn, self.owner, self._now_ms(), self.lease_ms)
                except MinikafkaError as exc:  # a busy ledger: the next beat tries again
                    log.warning("deliver: could not renew the partition leases: %s", exc)
            try:
                with ledger.atomic() as conn:
                    state.release_leases_in_current_transaction(conn, self.owner)
            except MinikafkaError as exc:  # they expire by themselves
                log.warning("deliver: could not release the partition leases: %s", exc)

    def _finish(self, runs: dict, stats: list[PartitionStats]) -> None:
        with Source(self.source_path) as source:
            conn = source.ledger.conn
            for st in stats:
                cid = acks.find_consumer(conn, st.topic, st.group)
                if cid is not None:
                    st.committed = acks.committed_offset(conn, cid, st.partition)
                    st.lag = acks.lag(conn, st.topic, cid).get(st.partition, 0)
            with source.ledger.atomic() as conn:
                for (group, topic), run in runs.items():
                    mine = [s for s in stats if s.group == group and s.topic == topic]
                    run.rows_in = sum(s.delivered + s.quarantined for s in mine)
                    run.rows_out = sum(s.delivered for s in mine)
                    run.rows_quarantined = sum(s.quarantined for s in mine)
                    run.rows_failed = sum(s.failed_attempts for s in mine)
                    run.details["by_partition"] = {
                        s.partition: {"delivered": s.delivered, "batches": s.batches, "failed_attempts": s.failed_attempts,
                                      "quarantined": s.quarantined, "committed": s.committed, "lag": s.lag,
                                      **({"held_by": s.held_by} if s.held_by else {})}
                        for s in mine}
                    run.details["stopped_by_signal"] = self.stopping
                    errors = [f"partition {s.partition}: {s.error}" for s in mine if s.error]
                    if errors:
                        run.finish("failed", redact_and_cut("; ".join(errors), 2000, self._secrets))
                    elif run.rows_quarantined:
                        run.finish("partial", f"{run.rows_quarantined} row(s) quarantined after max_attempts")
                    else:
                        run.finish("succeeded")
                    write_run_in_current_transaction(conn, run)

    def _guarded(self, spec: DeliverySpec, headers: dict, layout: TopicLayout, partition: int,
                 stats: PartitionStats) -> None:
        try:
            self._deliver_partition(spec, headers, layout, partition, stats)
        except Exception as exc:  # one partition's trouble must not take the others down
            stats.error = self._redact(f"{type(exc).__name__}: {exc}")

    # -- one partition --------------------------------------------------------------------
    def _take_lease(self, ledger, cid: int, partition: int) -> str | None:
        """None when this worker holds the partition's lease now, else its holder."""
        with ledger.relaxed_sync(), ledger.atomic() as conn:
            return state.acquire_lease_in_current_transaction(conn, cid, partition, self.owner, self._now_ms(),
                                                              self.lease_ms, gone=process_gone)

    def _deliver_partition(self, spec: DeliverySpec, headers: dict, layout: TopicLayout, partition: int,
                           stats: PartitionStats) -> None:
        backoff = Backoff(spec.interval, max(spec.interval, spec.max_backoff))
        with Source(self.source_path) as source, HttpPoster(spec.endpoint, headers=headers,
                                                           timeout=spec.timeout) as http:
            group = source.group(spec.name)
            cid = group._consumer_id(spec.topic, register=True)
            ledger = source.ledger
            leased = False
            while not self.stopping:
                if not leased:
                    holder = self._take_lease(ledger, cid, partition)
                    if holder is not None:
                        if self.once:
                            stats.held_by = holder
                            return
                        # a standby: ask again soon, without taking the write lock every few ms
                        self._stop.wait(min(max(spec.interval, STANDBY_POLL), self.lease_ms / 1000))
                        continue
                    leased = True
                batch = self._next_batch(source, group, cid, layout, partition, spec.batch_size)
                if batch is None:
                    if self.once:
                        return
                    self._stop.wait(spec.interval)
                    continue
                if batch is _LOST:
                    leased = False
                    continue
                rows, first, last, attempts = batch
                row_ids = [r[0] for r in rows]
                key = idempotency_key(spec.name, spec.topic, partition, first, last)
                body = to_json_bytes({"topic": spec.topic, "partition": partition, "messages": [
                    {"offset": r[0], "data": d, "created": r[1]} for r, d in zip(rows, _field_dicts(layout, rows))]})
                tries_this_run = 0
                while True:
                    outcome = http.post_json(body=body, idempotency_key=key)
                    if outcome.ok:
                        with ledger.relaxed_sync(), ledger.atomic() as conn:
                            kept = state.settle_batch_in_current_transaction(conn, spec.topic, cid, partition, row_ids,
                                                                             utc_now(), owner=self.owner)
                        with self._lock:
                            if kept:
                                stats.delivered += len(rows)
                                stats.batches += 1
                            else:
                                stats.leases_lost += 1
                        leased = leased and kept
                        break
                    attempts += 1
                    tries_this_run += 1
                    with self._lock:
                        stats.failed_attempts += 1
                    described = self._redact(outcome.describe())
                    if spec.max_attempts and attempts >= spec.max_attempts:
                        kept = self._quarantine(ledger, spec, cid, layout, partition, rows, attempts, described)
                        with self._lock:
                            if kept:
                                stats.quarantined += len(rows)
                            else:
                                stats.leases_lost += 1
                        leased = leased and kept
                        break
                    with ledger.relaxed_sync(), ledger.atomic() as conn:
                        state.note_failed_attempt_in_current_transaction(conn, cid, partition, attempts,
                                                                         cut(described, 500), utc_now())
                    if (self.once and not spec.max_attempts and tries_this_run >= ONCE_MIN_ATTEMPTS
                            and spec.interval * 2 ** (tries_this_run - 1) >= backoff.cap):
                        stats.error = (f"{redact_url(spec.endpoint)} failed {tries_this_run} time(s) this run "
                                       f"(last: {cut(described, 300)}); offsets {first}-{last} stay pending")
                        return
                    if self._stop.wait(backoff.delay(attempts, self.rng)):
                        return

    def _next_batch(self, source: Source, group, cid: int, layout: TopicLayout, partition: int,
                    batch_size: int) -> tuple[list[tuple], int, int, int] | object | None:
        """The batch in flight (after a crash: the same offsets again), else the next one,
        recorded in flight; None when nothing is pending, ``_LOST`` when the lease is gone."""
        ledger = source.ledger
        inflight = state.inflight_batch(ledger.conn, cid, partition)
        if inflight is not None:
            first, last, attempts = inflight
            rows, _ = group._fetch_rows(layout, partition, batch_size + (last - first) + 1)
            rows = [r for r in rows if first <= r[0] <= last]
            if rows:
                return rows, first, last, attempts
            with ledger.atomic() as conn:
                state.clear_inflight_in_current_transaction(conn, cid, partition)
        rows, _ = group._fetch_rows(layout, partition, batch_size)
        if not rows:
            return None
        first, last = rows[0][0], rows[-1][0]
        with ledger.relaxed_sync(), ledger.atomic() as conn:
            if not state.record_inflight_in_current_transaction(conn, cid, partition, first, last, len(rows),
                                                                utc_now(), owner=self.owner):
                return _LOST
        return rows, first, last, 0

    def _quarantine(self, ledger, spec: DeliverySpec, cid: int, layout: TopicLayout, partition: int,
                    rows: list[tuple], attempts: int, described: str) -> bool:
        reason = f"delivery to {redact_url(spec.endpoint)} failed {attempts} time(s); last: {cut(described, 500)}"
        payloads = [json.dumps(d, default=str, ensure_ascii=False) for d in _field_dicts(layout, rows)]
        with ledger.atomic() as conn:
            return state.quarantine_batch_in_current_transaction(
                conn, spec.topic, spec.name, cid, partition, [(r[0], p) for r, p in zip(rows, payloads)], reason,
                attempts, utc_now(), owner=self.owner)


_LOST = object()  # _next_batch: the partition's lease went to another worker


def process_gone(owner: str) -> bool:
    """The lease holder ``host:pid:nonce`` was a process on this host that no longer runs."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a killed process its parent has not reaped yet still answers kill(0)
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return False

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
    interval = "5s"                        # poll when idle, first retry delay (ms, s, m)
    timeout = "10s"                        # per request
    max_attempts = 0                       # 0: retry forever; N: then quarantine the batch
    max_backoff = "1m"                     # cap of the exponential backoff
    headers = { Authorization = "Bearer ${ORDERS_TOKEN}" }   # ${VAR} from the environment

Each (group, partition) runs in its own thread with its own connection, in offset
order: fetch a batch, record it as in flight (``_minikafka_inflight``), POST
``{"topic", "partition", "messages": [{"offset", "data", "created"}]}`` with an
``Idempotency-Key`` of group, topic, partition and first-last offsets; a 2xx commits the
batch's last offset and clears the in-flight row in one transaction. Anything else
(non-2xx, timeout, refused) retries the same batch with exponential backoff and jitter,
capped; with ``max_attempts`` N the batch's rows go to the quarantine with the last
status and body excerpt after N failed attempts, and delivery moves on. A worker that
was killed re-sends exactly the batch in flight (same key) before taking new rows.
Header values are resolved once and never printed or logged.

``once=True`` delivers what is pending and returns. A batch that keeps failing with
``max_attempts = 0`` gets at least three tries and more until its backoff has grown to
``max_backoff``; then the run reports it (the CLI exits 1) and it stays pending.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..api.modes.groups import _field_dicts
from ..api.source import Source
from ..errors import DeliveryConfigError, DeliveryError, MinikafkaError, TopicNotFoundError
from ..ledger import acks
from ..ledger.layout import TopicLayout
from ..ledger.quarantine import Quarantined, quarantine_in_current_transaction
from ..ledger.runlog import RunResult, new_run_id, write_run_in_current_transaction
from ..util.clock import utc_now
from ..util.tomlfile import read_toml
from .http import Backoff, HttpPoster, PostOutcome, idempotency_key, redact_url, to_json_bytes

DELIVERY_KEYS = {"name", "topic", "partitions", "endpoint", "batch_size", "interval", "timeout", "max_attempts",
                 "max_backoff", "headers", "description"}
TOP_KEYS = {"source", "deliveries", "pipeline", "spark", "topics", "stages"}
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)\s*$")
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# --once with max_attempts = 0 (retry forever) must still end: a failing batch gets at
# least this many tries in the run, and more until its backoff has grown to max_backoff;
# then the run reports it (exit 1) and the batch stays pending for the next run.
ONCE_MIN_ATTEMPTS = 3


def parse_duration(value: Any, where: str) -> float:
    """Seconds from ``"250ms"``, ``"5s"``, ``"2m"`` or a number of seconds.

    Raises:
        DeliveryConfigError: anything else, or a value that is not positive.
    """
    if isinstance(value, bool):
        raise DeliveryConfigError(f"{where}: expected a duration like '500ms', '5s' or '1m', got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = DURATION.match(str(value))
        if not match:
            raise DeliveryConfigError(f"{where}: expected a duration like '500ms', '5s' or '1m', got {value!r}")
        number, unit = float(match.group(1)), match.group(2)
        seconds = number / 1000 if unit == "ms" else number * 60 if unit == "m" else number
    if seconds <= 0:
        raise DeliveryConfigError(f"{where}: the duration must be positive, got {value!r}")
    return seconds


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
    from ..ledger.identifiers import validate_consumer_name, validate_topic_name

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
        raise _fail(path, f"{where}, key 'endpoint'", f"must be an http:// or https:// URL, got {endpoint!r}")
    partitions = spec.get("partitions")
    if partitions is not None:
        if not isinstance(partitions, list) or not partitions or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions):
            raise _fail(path, f"{where}, key 'partitions'", f"must be a non-empty list of partition numbers, got {partitions!r}")
        partitions = sorted(set(partitions))
    headers = spec.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise _fail(path, f"{where}, key 'headers'", "must be a table of header names to text values")
    return DeliverySpec(
        name=spec["name"], topic=spec["topic"], endpoint=endpoint, partitions=partitions,
        batch_size=_positive_int(path, f"{where}, key 'batch_size'", spec.get("batch_size", 100)),
        interval=parse_duration(spec.get("interval", "1s"), f"{path}: {where}, key 'interval'"),
        timeout=parse_duration(spec.get("timeout", "10s"), f"{path}: {where}, key 'timeout'"),
        max_attempts=_positive_int(path, f"{where}, key 'max_attempts'", spec.get("max_attempts", 0), zero=True),
        max_backoff=parse_duration(spec.get("max_backoff", "1m"), f"{path}: {where}, key 'max_backoff'"),
        headers=dict(headers),
    )


def load_deliveries(path: str | Path) -> DeliveryFile:
    """Parse a deliveries file or the ``[[deliveries]]`` of a pipeline file.

    Raises:
        DeliveryConfigError: unreadable TOML, unknown keys, a bad interval, a missing
            endpoint, duplicate deliveries of one group and topic, no deliveries.
    """
    path = Path(path)
    raw = read_toml(path, DeliveryConfigError, "deliveries file")
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        raise _fail(path, "top level", f"unknown key(s) {unknown}; expected {sorted(TOP_KEYS)}")
    source = raw.get("source", (raw.get("pipeline") or {}).get("source"))
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
class PartitionStats:
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

    def line(self) -> str:
        text = (f"group {self.group} topic {self.topic} partition {self.partition}: delivered {self.delivered} "
                f"in {self.batches} batch(es), {self.failed_attempts} failed attempt(s), "
                f"{self.quarantined} quarantined, committed offset {self.committed}, lag {self.lag}")
        return text + (f"; stopped: {self.error}" if self.error else "")


@dataclass
class DeliverySummary:
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


class DeliveryWorker:
    """Deliver the given specs from the ledger at ``source_path`` (see the module docstring).

    Args:
        once: deliver what is pending and return (for cron); otherwise run until ``stop()``.
        progress: called with a progress line every ``progress_every`` seconds (None: quiet).
        rng: the jitter's random source (tests pass a seeded one).
    """

    def __init__(self, source_path: str, specs: list[DeliverySpec], *, once: bool = False,
                 progress: Callable[[str], None] | None = None, progress_every: float = 2.0,
                 rng: random.Random | None = None, environ: dict[str, str] | None = None):
        self.source_path = str(source_path)
        self.specs = list(specs)
        self.once = once
        self.progress = progress
        self.progress_every = progress_every
        self.rng = rng or random.Random()
        self.environ = environ
        self._stop = threading.Event()
        self._lock = threading.Lock()

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
            HttpPoster(spec.endpoint, timeout=spec.timeout).close()  # checks the URL before any thread starts
            plan.append((spec, headers, layout, parts))
        return plan

    def run(self) -> DeliverySummary:
        """Deliver; returns the summary (also written to the run log, one row per delivery).

        Raises:
            DeliveryError: a topic or partition does not exist (nothing is delivered).
            DeliveryConfigError: a header's environment variable is not set.
        """
        t0 = time.perf_counter()
        with Source(self.source_path) as source:
            plan = self._plan(source)
            runs = {}
            with source._ledger.atomic() as conn:
                for spec, _h, _layout, parts in plan:
                    run = RunResult(new_run_id("deliver"), "delivery", stage=f"deliver:{spec.name}", consumer=spec.name,
                                    inputs=[spec.topic], outputs=[redact_url(spec.endpoint)],
                                    details={"endpoint": redact_url(spec.endpoint), "partitions": parts,
                                             "batch_size": spec.batch_size, "once": self.once})
                    runs[spec.name, spec.topic] = run
                    write_run_in_current_transaction(conn, run)
                    acks.register_group_in_current_transaction(conn, spec.topic, spec.name, utc_now())
        stats = [PartitionStats(spec.name, spec.topic, p) for spec, _h, _l, parts in plan for p in parts]
        threads = []
        it = iter(stats)
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
                    done = sum(s.delivered for s in stats)
                    failed = sum(s.failed_attempts for s in stats)
                    quarantined = sum(s.quarantined for s in stats)
                self.progress(f"deliver: {done} delivered, {failed} failed attempt(s), {quarantined} quarantined"
                              + (" (stopping after the batches in flight)" if self.stopping else ""))
        summary = DeliverySummary(stats, [r.run_id for r in runs.values()], time.perf_counter() - t0)
        self._finish(runs, stats)
        return summary

    def _finish(self, runs: dict, stats: list[PartitionStats]) -> None:
        with Source(self.source_path) as source:
            conn = source._ledger.conn
            for st in stats:
                cid = acks.find_consumer(conn, st.topic, st.group)
                if cid is not None:
                    st.committed = acks.committed_offset(conn, cid, st.partition)
                    st.lag = acks.lag(conn, st.topic, cid).get(st.partition, 0)
            with source._ledger.atomic() as conn:
                for (group, topic), run in runs.items():
                    mine = [s for s in stats if s.group == group and s.topic == topic]
                    run.rows_in = sum(s.delivered + s.quarantined for s in mine)
                    run.rows_out = sum(s.delivered for s in mine)
                    run.rows_quarantined = sum(s.quarantined for s in mine)
                    run.rows_failed = sum(s.failed_attempts for s in mine)
                    run.details["by_partition"] = {
                        s.partition: {"delivered": s.delivered, "batches": s.batches, "failed_attempts": s.failed_attempts,
                                      "quarantined": s.quarantined, "committed": s.committed, "lag": s.lag}
                        for s in mine}
                    run.details["stopped_by_signal"] = self.stopping
                    errors = [f"partition {s.partition}: {s.error}" for s in mine if s.error]
                    if errors:
                        run.finish("failed", "; ".join(errors)[:2000])
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
            stats.error = f"{type(exc).__name__}: {exc}"

    # -- one partition --------------------------------------------------------------------
    def _deliver_partition(self, spec: DeliverySpec, headers: dict, layout: TopicLayout, partition: int,
                           stats: PartitionStats) -> None:
        backoff = Backoff(spec.interval, max(spec.interval, spec.max_backoff))
        with Source(self.source_path) as source, HttpPoster(spec.endpoint, headers=headers,
                                                           timeout=spec.timeout) as http:
            group = source.group(spec.name)
            cid = group._consumer_id(spec.topic, register=True)
            ledger = source._ledger
            while not self.stopping:
                batch = self._next_batch(source, group, cid, layout, partition, spec.batch_size)
                if batch is None:
                    if self.once:
                        return
                    self._stop.wait(spec.interval)
                    continue
                rows, first, last, attempts = batch
                key = idempotency_key(spec.name, spec.topic, partition, first, last)
                body = to_json_bytes({"topic": spec.topic, "partition": partition, "messages": [
                    {"offset": r[0], "data": d, "created": r[1]} for r, d in zip(rows, _field_dicts(layout, rows))]})
                tries_this_run = 0
                while True:
                    outcome = http.post_json(body=body, idempotency_key=key)
                    if outcome.ok:
                        with ledger.relaxed_sync(), ledger.atomic() as conn:
                            acks.commit_offset_in_current_transaction(conn, spec.topic, cid, partition, last, utc_now())
                            conn.execute("DELETE FROM _minikafka_inflight WHERE consumer_id = ? AND partition = ?",
                                         (cid, partition))
                        with self._lock:
                            stats.delivered += len(rows)
                            stats.batches += 1
                        break
                    attempts += 1
                    tries_this_run += 1
                    with self._lock:
                        stats.failed_attempts += 1
                    if spec.max_attempts and attempts >= spec.max_attempts:
                        self._quarantine(ledger, spec, cid, layout, partition, rows, last, attempts, outcome)
                        with self._lock:
                            stats.quarantined += len(rows)
                        break
                    with ledger.relaxed_sync(), ledger.atomic() as conn:
                        conn.execute("UPDATE _minikafka_inflight SET attempts = ?, last_error = ?, updated_at = ? "
                                     "WHERE consumer_id = ? AND partition = ?",
                                     (attempts, outcome.describe()[:500], utc_now(), cid, partition))
                    if (self.once and not spec.max_attempts and tries_this_run >= ONCE_MIN_ATTEMPTS
                            and spec.interval * 2 ** (tries_this_run - 1) >= backoff.cap):
                        stats.error = (f"{redact_url(spec.endpoint)} failed {tries_this_run} time(s) this run "
                                       f"(last: {outcome.describe()[:300]}); offsets {first}-{last} stay pending")
                        return
                    if self._stop.wait(backoff.delay(attempts, self.rng)):
                        return

    def _next_batch(self, source: Source, group, cid: int, layout: TopicLayout, partition: int,
                    batch_size: int) -> tuple[list[tuple], int, int, int] | None:
        """The batch in flight (after a crash: the same offsets again), else the next one, recorded in flight."""
        ledger = source._ledger
        conn = ledger.conn
        inflight = conn.execute(
            "SELECT first_offset, last_offset, attempts FROM _minikafka_inflight WHERE consumer_id = ? AND partition = ?",
            (cid, partition)).fetchone()
        if inflight is not None:
            first, last, attempts = inflight
            rows, _ = group._fetch_rows(layout, partition, batch_size + (last - first) + 1)
            rows = [r for r in rows if first <= r[0] <= last]
            if rows:
                return rows, first, last, attempts
            with ledger.atomic() as c:
                c.execute("DELETE FROM _minikafka_inflight WHERE consumer_id = ? AND partition = ?", (cid, partition))
        rows, _ = group._fetch_rows(layout, partition, batch_size)
        if not rows:
            return None
        first, last = rows[0][0], rows[-1][0]
        with ledger.relaxed_sync(), ledger.atomic() as c:
            c.execute("INSERT OR REPLACE INTO _minikafka_inflight (consumer_id, partition, first_offset, last_offset, "
                      "rows, attempts, updated_at) VALUES (?, ?, ?, ?, ?, 0, ?)",
                      (cid, partition, first, last, len(rows), utc_now()))
        return rows, first, last, 0

    def _quarantine(self, ledger, spec: DeliverySpec, cid: int, layout: TopicLayout, partition: int,
                    rows: list[tuple], last: int, attempts: int, outcome: PostOutcome) -> None:
        reason = (f"delivery to {redact_url(spec.endpoint)} failed {attempts} time(s); last: "
                  f"{outcome.describe()[:500]}")
        now = utc_now()
        payloads = [json.dumps(d, default=str, ensure_ascii=False) for d in _field_dicts(layout, rows)]
        with ledger.atomic() as conn:
            quarantine_in_current_transaction(conn, [
                Quarantined(spec.topic, payload, reason, "delivery", now, consumer=spec.name, row_id=r[0],
                            attempts=attempts) for r, payload in zip(rows, payloads)])
            acks.commit_offset_in_current_transaction(conn, spec.topic, cid, partition, last, now)
            conn.execute("DELETE FROM _minikafka_inflight WHERE consumer_id = ? AND partition = ?", (cid, partition))

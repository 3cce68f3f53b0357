"""``minikafka watch``: one warm Spark application that runs each stage when its trigger fires.

Triggers (``trigger = {...}`` in a stage of the pipeline file):

- default: as soon as new rows are committed to an input, debounced (``debounce``,
  default 0.2 s: a burst of appends becomes one run);
- ``{ rows = N }``: once at least N new rows are pending;
- ``{ every = "5m" }``: relaxed: every 5 minutes, whatever is pending;
- ``{ every = "5m", fixed = true }``: at each wall-clock boundary (multiples of 5
  minutes since the epoch), the rows committed before that boundary.

"New" rows are those the stage has not yet tried in this watch: rows left pending by a
best_effort run (failed rows) wait for fresh input or the next start, so an idle watch
does exactly what one ``minikafka run`` does. Stages are visited in DAG order, so
downstream stages run as their inputs fill. A failing stage is logged and backed off
(exponentially, 5 s to 5 min) while the others go on. One status line per run. SIGTERM
or SIGINT: the run in flight finishes (its commit included) and watch returns (the CLI
exits 0, or 130 after SIGINT); a second SIGINT stops the run in flight at once (its run
is recorded as 'interrupted', nothing of it committed). With
``until_idle`` watch exits once no stage has work its trigger accepts (1 if a stage failed).
With ``[lineage]`` in the pipeline file every stage run sends its OpenLineage START and its
ending, as ``minikafka run`` does (``pipelines.lineage``), and watch first sends the endings
of earlier runs whose process was killed.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ..api.source import Source
from ..ledger.consuming import new_run_id
from ..ledger.topics import TopicTable, acks
from ..util import clock
from ..util.clock import format_timestamp, parse_timestamp
from ..util.redact import redact_and_cut
from ..util.results import Result
from .definition import PipelineDefinition, StageDefinition
from .launch import run_in_process, watch_session
from .lineage import Lineage
from .opening import open_source
from .results import StageOutcome

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DEFAULT_DEBOUNCE = 0.2


@dataclass
class StageState:
    """What watch remembers about one stage between passes."""

    sd: StageDefinition
    left_pending: int = 0  # rows its last run left pending (failed rows): not new work
    seen: int = -1  # pending count at the last look
    changed_at: float = 0.0  # monotonic time the pending count last changed
    last_run: datetime | None = None  # wall clock (the ledger's), for every = "..."
    failures: int = 0
    backoff_until: float = 0.0
    runs: int = 0


@dataclass
class WatchResult(Result):
    outcomes: list[StageOutcome] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False  # stopped by SIGINT (Ctrl-C)

    @property
    def failed(self) -> list[StageOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        return (f"watch ran {len(self.outcomes)} stage run(s) in {self.seconds:.1f} s, "
                f"{len(self.failed)} failed")


def pending_rows(source: Source, topic: str, consumer: str, *, before: str | None = None) -> tuple[int, int]:
    """(rows pending for ``consumer``, highest such id), optionally only rows committed before ``before``."""
    table = TopicTable(source.ledger.conn, source.layout(topic))
    return table.pending(acks.find_consumer(table.conn, topic, consumer), before=before)


class Watch:
    """Run a pipeline's stages by trigger in one Spark application.

    Args:
        defn: the loaded pipeline.
        spark: a SparkSession to use (default: built on the first run that needs one).
        master: Spark master URL (default: the pipeline's).
        remote: run the stages as a client of the engine at this URL (default: the pipeline's
            ``[engine] remote``, else a Spark application of its own).
        until_idle: return once no stage has work its trigger accepts.
        poll: seconds between looks at the ledger when nothing ran.
        echo: where status lines go.
    """

    def __init__(self, defn: PipelineDefinition, *, spark: Any = None, master: str | None = None,
                 until_idle: bool = False, poll: float = 0.1, echo: Callable[[str], Any] = print,
                 backoff: tuple[float, float] = (5.0, 300.0), remote: str | None = None):
        self.defn = defn
        self.remote = remote or defn.engine.remote
        self.spark = spark
        self.master = master or defn.master
        self.until_idle = until_idle
        self.poll = poll
        self.echo = echo
        self.backoff = backoff
        self.states = {sd.name: StageState(sd) for sd in defn.stages}
        self._stop = threading.Event()
        self._next_retention = 0.0
        self.interrupted = False
        self.lineage: Lineage | None = None

    def stop(self) -> None:
        """Finish the run in flight, then return from ``run()``."""
        self._stop.set()

    def run(self) -> WatchResult:
        result = WatchResult()
        t0 = time.perf_counter()
        handlers = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                handlers[sig] = signal.signal(sig, lambda signum, _frame: self._on_signal(signum))
        try:
            notes: list[str] = []
            with open_source(self.defn, notes=notes) as source:
                for line in notes:  # a new stage that starts past rows that exist says so
                    self.echo(line)
                for st in self.states.values():
                    last = source.runs(stage=st.sd.name, limit=1)
                    if last and last[0]["finished_at"]:
                        st.last_run = parse_timestamp(last[0]["finished_at"])
            self.echo(f"watching {self.defn.name}: {len(self.states)} stage(s)"
                      + (" until idle" if self.until_idle else "; SIGTERM or Ctrl-C to stop"))
            with Source(str(self.defn.source)) as source:
                self.lineage = Lineage.of(self.defn, source, self.echo)
                if self.lineage is not None:
                    self.lineage.recover()  # the endings of earlier runs whose process was killed
                while not self._stop.is_set():
                    watcher = getattr(source, "watcher", None)  # wakes on commits where the ledger has one
                    mark = watcher.mark() if watcher is not None else None
                    ran = self._pass(result, source)
                    if self.until_idle and not ran:
                        break
                    if not ran:
                        if mark is not None:
                            watcher.wait(mark, self.poll)
                        else:
                            self._stop.wait(self.poll)
        finally:
            for sig, previous in handlers.items():
                signal.signal(sig, previous)
            result.seconds = time.perf_counter() - t0
            result.interrupted = self.interrupted
        return result

    def _on_signal(self, signum: int | None = None) -> None:
        if signum == signal.SIGINT:
            if self.interrupted:  # the second Ctrl-C: stop the run in flight now
                raise KeyboardInterrupt
            self.interrupted = True
        if not self._stop.is_set():
            self.echo("stopping: finishing the run in flight" + (" (Ctrl-C again stops it now)" if self.interrupted else ""))
        self._stop.set()

    # -- one pass over the DAG ------------------------------------------------------------
    def _pass(self, result: WatchResult, source: Source | None = None) -> bool:
        """Run the first stage (in DAG order) whose trigger fires; True if one ran."""
        ran = False
        if source is None:
            with Source(str(self.defn.source)) as own:
                return self._pass(result, own)
        self._maybe_retention(source)
        due = []
        for sd in self.defn.stages:
            st = self.states[sd.name]
            if time.monotonic() < st.backoff_until or (self.until_idle and st.failures):
                continue
            decision = self._due(source, st)
            if decision is not None:
                due.append((st, decision))
                break  # run one, then look again: downstream inputs may just have filled
        for st, (reason, upto) in due:
            if self._stop.is_set():
                break
            outcome = self._run(st, upto)
            result.outcomes.append(outcome)
            self._status(st, outcome, reason)
            ran = True
        return ran

    def _due(self, source: Source, st: StageState) -> tuple[str, dict[str, int] | None] | None:
        trig = st.sd.trigger
        now = clock.now()
        if trig.get("fixed"):
            boundary = self._boundary(now, trig["every"])
            cut = format_timestamp(boundary)
            upto, total = {}, 0
            for name in st.sd.inputs:
                n, top = pending_rows(source, name, st.sd.consumer, before=cut)
                upto[name], total = top, total + n
            if total > st.left_pending:
                return f"interval ending {cut}", upto
            return None
        pending = sum(pending_rows(source, name, st.sd.consumer)[0] for name in st.sd.inputs)
        if pending != st.seen:
            st.seen, st.changed_at = pending, time.monotonic()
        fresh = pending - st.left_pending
        if fresh <= 0:
            return None
        if "rows" in trig:
            return (f"{fresh} new row(s) >= {trig['rows']}", None) if fresh >= trig["rows"] else None
        if "every" in trig:
            if st.last_run is None or now >= st.last_run + timedelta(seconds=trig["every"]):
                return f"every {trig['every']:g}s", None
            return None
        quiet = time.monotonic() - st.changed_at
        if self.until_idle or quiet >= trig.get("debounce", DEFAULT_DEBOUNCE):
            return f"{fresh} new row(s)", None
        return None

    @staticmethod
    def _boundary(now: datetime, every: float) -> datetime:
        seconds = (now - EPOCH).total_seconds()
        return EPOCH + timedelta(seconds=math.floor(seconds / every) * every)

    def _run(self, st: StageState, upto: dict[str, int] | None) -> StageOutcome:
        spark = self._session()
        run_id = new_run_id(st.sd.name)  # the run's one id: its run-log row and its lineage events
        if self.lineage is not None:
            self.lineage.started(st.sd, run_id)
        try:
            outcome = run_in_process(spark, self.defn, st.sd, False, staging=self.defn.staging, upto=upto,
                                     run_id=run_id)
        except KeyboardInterrupt:  # the second Ctrl-C stopped the run in flight
            if self.lineage is not None:
                self.lineage.ended(st.sd, run_id)
            raise
        except Exception as exc:  # a stage that cannot even start must not stop the others
            outcome = StageOutcome(st.sd.name, "failed", 0.0, None, f"{type(exc).__name__}: {exc}")
        if self.lineage is not None:
            self.lineage.ended(st.sd, run_id, outcome)
        st.runs += 1
        st.last_run = clock.now()
        if outcome.status == "failed":
            st.failures += 1
            delay = min(self.backoff[1], self.backoff[0] * 2 ** (st.failures - 1))
            st.backoff_until = time.monotonic() + delay
            st.left_pending = 0
        else:
            st.failures = 0
            st.backoff_until = 0.0
            st.left_pending = int((outcome.run or {}).get("rows_failed", 0) or 0)
        return outcome

    def _session(self):
        if self.spark is None:
            self.spark = watch_session(self.defn, self.master, self.remote)
        return self.spark

    def _status(self, st: StageState, outcome: StageOutcome, reason: str) -> None:
        r = outcome.run or {}
        line = (f"{format_timestamp(clock.now())[:19]}Z {st.sd.name:20} {outcome.status:9} in={r.get('rows_in', 0)} "
                f"out={r.get('rows_out', 0)} dup={r.get('rows_duplicate', 0)} quar={r.get('rows_quarantined', 0)} "
                f"fail={r.get('rows_failed', 0)} {outcome.seconds:.1f}s ({reason})")
        if outcome.status == "failed":
            wait = max(0.0, st.backoff_until - time.monotonic())
            line += f" ERROR {redact_and_cut(outcome.error, 300)}" + ("" if self.until_idle else f"; retry in {wait:.0f}s")
        self.echo(line)

    def _maybe_retention(self, source: Source) -> None:
        if time.monotonic() >= self._next_retention:
            self._next_retention = time.monotonic() + 60.0
            source.apply_retention()

"""Sessions made ahead on the engine for a run's per-row stages, with their Python workers warm.

A stage with a per-row Python function (``row_fn``) runs it in the engine's Python workers,
and Spark Connect keeps those per session: each such stage's first task waited for a new
worker to start and import the job's code (measured: about 1 s on a quiet engine, 2-3 s with
two stages starting together). So on an engine ``run`` makes each per-row stage's session
itself as the run starts, ships the code there and runs one small task that imports what the
stage's function will import (minikafka's per-row code and the job's module). The stage's
client attaches to that session (``;session_id=`` in its engine URL) and finds a worker ready.

The session is still the stage's alone (its cache, settings and views), and the stage still
releases it when it ends; a session that no stage took (skipped, or nothing new) is released
by ``run`` at its end. A session not ready when its stage starts, or a warm-up that fails,
only leaves the stage to make its own session, as without this.
"""

from __future__ import annotations

import logging
import threading
import uuid

from ..definition import PipelineDefinition, StageDefinition

log = logging.getLogger("minikafka.pipelines")

ROW_CODE = "minikafka.spark.stages.rowfn"  # what every per-row task imports, besides the job


def with_session(url: str, session_id: str) -> str:
    """The engine URL naming one session: ``sc://HOST:PORT/;...;session_id=ID``."""
    base, sep, params = url.partition("/;")
    kept = [p for p in params.split(";") if p and not p.startswith("session_id=")] if sep else []
    return base.rstrip("/") + "/;" + ";".join([*kept, f"session_id={session_id}"])


def _warm_task(modules: list[str]):
    def mapper(batches):
        import importlib

        for name in modules:
            importlib.import_module(name)
        yield from batches

    return mapper


def is_per_row(sd: StageDefinition) -> bool:
    """The stage's job defines ``row_fn`` (its module imports, as the runner's command line needs it)."""
    try:
        return getattr(sd.job_module(), "row_fn", None) is not None
    except Exception:  # noqa: BLE001 - the stage's own process reports a job that does not import
        return False


class StageSessions:
    """The sessions of one run's per-row stages: made (with the code) in a background thread as
    the run starts; each warmed, in a thread of its own, as soon as every stage it reads from
    has started. Warm-ups that are due together run together: measured on the example DAG
    (2 cores), warming llm_summary's session only after transcribe's made it run beside
    split_youtube's checks, the run's critical path, and llm_summary's first task waited for
    its worker anyway; warmed together at the start, they run while the first stages with a
    suite wait for the stage host's import of great-expectations (warm DAG about 0.4 s sooner)."""

    CLOSE_WAIT_S = 2.0  # at the run's end (or Ctrl-C), for a warm-up still running; past it the engine drops what is left

    def __init__(self, defn: PipelineDefinition, stages: list[StageDefinition], url: str, code_zip: str | None):
        import queue

        self.defn, self.url, self.code_zip = defn, url, code_zip
        self._upstream = {sd.name: {o.name for o in stages if o is not sd and set(o.outputs) & set(sd.reads)}
                          for sd in stages}
        self._started: set[str] = set()
        self._made: dict[str, tuple[str, object]] = {}  # stage -> (session id, its client), once it holds the code
        self._taken: set[str] = set()
        self._warm_asked: set[str] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._asks: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._serve, args=(stages,),
                                        name="minikafka-stage-sessions", daemon=True)
        self._thread.start()

    def started(self, name: str) -> None:
        """The runner started stage ``name``: warm the sessions of the stages that now have every
        stage they read from started."""
        with self._lock:
            self._started.add(name)
            due = [s for s, (_sid, _client) in self._made.items() if s not in self._warm_asked
                   and self._upstream[s] <= self._started]
            self._warm_asked.update(due)
        for stage in due:
            self._asks.put(stage)

    def _serve(self, stages: list[StageDefinition]) -> None:
        by_name = {sd.name: sd for sd in stages}
        for sd in stages:
            if self._stopped.is_set():
                break
            try:
                if is_per_row(sd):
                    self._make(sd)
            except Exception as exc:  # noqa: BLE001 - the stage makes its own session instead
                log.debug("stage %s: no session made ahead: %s", sd.name, exc)
        self.started("")  # stages with no upstream stage are due now
        warming: list[threading.Thread] = []
        while not self._stopped.is_set():
            name = self._asks.get()
            if name is None:
                break
            thread = threading.Thread(target=self._warm, args=(by_name[name], self._made[name][1]),
                                      name=f"minikafka-warm-{name}", daemon=True)
            thread.start()
            warming.append(thread)
        for thread in warming:  # close() waits for this thread at most CLOSE_WAIT_S in all
            thread.join()
        with self._lock:
            clients = [client for _sid, client in self._made.values()]
        for client in clients:
            try:
                client.stop()  # this client's channel only: the session stays for its stage
            except Exception:  # noqa: BLE001 - nothing of the stage depends on it
                pass

    def _warm(self, sd: StageDefinition, spark) -> None:
        try:
            spark.range(1, numPartitions=1).mapInArrow(_warm_task([ROW_CODE, sd.job]), "id long").collect()
        except Exception as exc:  # noqa: BLE001 - a worker that did not warm starts with the stage's task
            log.debug("stage %s: warm-up failed: %s", sd.name, exc)

    def _make(self, sd: StageDefinition) -> None:
        from ...spark.engine import connect

        session_id = str(uuid.uuid4())
        spark = connect(with_session(self.url, session_id), conf={**self.defn.spark, **sd.spark}, new=True)
        spark.release_session_on_close = False
        try:
            if self.code_zip:
                spark.addArtifacts(self.code_zip, pyfile=True)
        except BaseException:
            spark.release_session_on_close = True
            spark.stop()
            raise
        with self._lock:
            self._made[sd.name] = (session_id, spark)  # from here on the stage may attach

    def url_for(self, sd: StageDefinition) -> str | None:
        """The engine URL naming the stage's session once it holds the stage's code, else None
        (the stage then makes its own session and ships the code itself, as without this)."""
        with self._lock:
            made = self._made.get(sd.name)
            if made is None or self._stopped.is_set():
                return None
            self._taken.add(sd.name)
        return with_session(self.url, made[0])

    def close(self) -> None:
        """Stop making and warming sessions; release those no stage took."""
        self._stopped.set()
        self._asks.put(None)
        self._thread.join(self.CLOSE_WAIT_S)
        with self._lock:
            left = [sid for name, (sid, _client) in self._made.items() if name not in self._taken]
            self._taken.update(self._made)
        for session_id in left:
            _release(self.url, session_id)


def _release(url: str, session_id: str) -> None:
    from ...spark.engine import connect

    try:
        connect(with_session(url, session_id), new=True).stop()  # stop() releases the session on the engine
    except Exception:  # noqa: BLE001 - the engine drops an idle session after its own timeout
        pass

"""The warm engine of a pipeline: serve one, find it, start one for a run, stop it.

An engine is a Spark Connect server on the ledger's host; one serves every pipeline of a
user on the same master (``spark.engines``: each stage is a session of its own, with its
pipeline's ``spark.sql.*`` settings and code). ``serve`` runs one in the foreground
(systemd, a terminal) until SIGTERM, Ctrl-C or, when given, an idle timeout. While it runs,
a state file in the user's engine directory names its URL, process, master and the settings
its JVM started with, so ``run`` of any pipeline on that master, ``status`` and
``engine stop`` find it. ``ensure_engine`` gives ``run`` an engine: the running one its
pipeline agrees with, else a new ``serve`` started in the background with an idle timeout
(the reason printed when another engine of the user runs), which stops by itself once no
run has used it for that long (the runner marks it used while stages run).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from ...errors import EngineError
from ...util.faults import checkpoint
from ...util.redact import redact_url
from ..definition import PipelineDefinition

WARMUP_SQL = "SELECT k, count(*) AS n, max(s) AS s FROM (SELECT id % 7 AS k, CAST(id AS STRING) AS s FROM range(20000)) GROUP BY k"
# The client JIT alone: the optimizing one spent the CPU of a run's small stages compiling
# (measured on the example DAG, 2 cores: from cold 16.9 -> 12.1 s, on the warm engine 11.3 ->
# 9.6 s; bench_staging's 1,000,000-row stage, bound by its commit, the same within noise).
# A pipeline that sets spark.driver.extraJavaOptions in [spark] replaces this.
ENGINE_JIT = "-XX:TieredStopAtLevel=1"
JVM_SIGTERM_EXIT = 143  # a JVM that ran its shutdown hooks on SIGTERM exits with 128 + 15


def _master(defn: PipelineDefinition | None, master: str | None = None) -> str:
    return master or (defn.master if defn is not None else "local[*]")


def _fixed(defn: PipelineDefinition | None) -> dict[str, str]:
    from ...spark.engines import fixed_settings

    return fixed_settings(defn.spark if defn is not None else {})


def state_path(defn: PipelineDefinition | None, master: str | None = None) -> Path:
    """The state file of the engine ``defn`` would start on ``master`` (default: its own)."""
    from ...spark.engines import slot_path

    return slot_path(_master(defn, master), _fixed(defn))


def lease_path(defn: PipelineDefinition | None, master: str | None = None) -> Path:
    """The file whose modification time says when the engine was last used."""
    from ...spark.engines import lease_path as lease_of

    return lease_of(state_path(defn, master))


# An engine on a cluster (any master but local[...]) gives its executors back once they are idle and
# asks for them again when a stage has tasks: it lives for minutes unused, and a standalone master
# would otherwise leave every other application WAITING with 0 cores all that time. Shuffle tracking
# stands in for an external shuffle service; executors holding shuffle files or cached blocks of
# finished stages are released after the same timeout (a later stage recomputes what it needs).
# The pipeline's [spark] table wins (spark.dynamicAllocation.enabled = "false" keeps them; a
# spark.cores.max caps what the engine takes while it works).
CLUSTER_ENGINE_IDLE = "10s"
CLUSTER_ENGINE_SETTINGS = {
    "spark.dynamicAllocation.enabled": "true",
    "spark.dynamicAllocation.shuffleTracking.enabled": "true",
    "spark.dynamicAllocation.minExecutors": "0",
    "spark.dynamicAllocation.executorIdleTimeout": CLUSTER_ENGINE_IDLE,
    "spark.dynamicAllocation.cachedExecutorIdleTimeout": CLUSTER_ENGINE_IDLE,
    "spark.dynamicAllocation.shuffleTracking.timeout": CLUSTER_ENGINE_IDLE,
}


def server_settings(defn: PipelineDefinition | None, master: str | None = None) -> dict[str, str]:
    """minikafka's Spark settings (JDBC jar, UTC, ...) with the pipeline's fixed ``[spark]`` settings
    over them; on a non-local ``master``, ``CLUSTER_ENGINE_SETTINGS`` under both (executors given back
    when idle). The pipeline's runtime ``spark.sql.*`` settings are not the engine's: each of its
    sessions sets them (``spark.engine.connect``), so another pipeline's sessions do not inherit them.

    Raises:
        SparkSetupError: no Java, or no SQLite JDBC jar.
    """
    from ...spark.session import check_java, jdbc_jar, session_conf
    from ...spark.staging import is_local_master

    check_java()
    settings = dict(CLUSTER_ENGINE_SETTINGS) if master and not is_local_master(master) else {}
    settings.update(session_conf(jar=jdbc_jar()))
    settings.update(_fixed(defn))
    return settings


def find_engine(defn: PipelineDefinition | None, master: str | None = None):
    """The running engine this pipeline uses on ``master`` (default: its own) if one answers, else
    None: an engine of the user on that master whose fixed settings agree with the pipeline's."""
    from ...spark.engines import choose

    _path, state, _why = choose(_master(defn, master), _fixed(defn))
    return state


def serve(defn: PipelineDefinition | None, *, master: str | None = None, host: str | None = None,
          port: int | None = None, idle_timeout: float | None = None, echo=print, warm_up: bool = True,
          metrics_port: int | None = None) -> str:
    """Run an engine in the foreground until SIGTERM, SIGINT or ``idle_timeout`` seconds unused.

    Prints ``engine ready at sc://HOST:PORT (...)`` once clients can use it (after a small
    stage's Spark work when ``warm_up``) and a last line when it stopped. Returns why it
    stopped ("signal", "idle", or "exited").

    The JVM runs with the client JIT alone (``ENGINE_JIT``) and maps the engine's
    class-data-sharing archive (``spark.stages.driver_jvm``; the first engine writes it as it
    stops), unless the pipeline sets ``spark.driver.extraJavaOptions``; once it answers, it
    runs below its clients' CPU priority (``EngineProcess.lower_priority``).

    ``metrics_port``: also serve the engine's Prometheus text (and its pipeline's ledger's) at
    ``http://HOST:PORT/metrics`` (``metrics_port.py``; 0: any free port), named in the ready line.

    Raises:
        EngineError: the port (or the metrics port) is taken, another engine of this pipeline
            runs, or the JVM exited before it was ready.
        SparkSetupError: no Java, or no SQLite JDBC jar.
    """
    from ...spark import engine as eng

    master = _master(defn, master)
    settings = server_settings(defn, master)
    archive = None
    if "spark.driver.extraJavaOptions" not in (defn.spark if defn is not None else {}):  # the pipeline's own wins
        from ...spark.stages.driver_jvm import driver_options

        java, archive = driver_options(settings["spark.driver.extraJavaOptions"], None, kind="engine")
        settings["spark.driver.extraJavaOptions"] = f"{java} {ENGINE_JIT}"
    host = host or (defn.engine.host if defn is not None else None) or eng.DEFAULT_HOST
    if port is None:
        port = (defn.engine.port if defn is not None else None) or eng.DEFAULT_PORT
    if port == 0:
        port = eng.free_port(host)
    with _serving(defn, master):
        metrics = None
        if metrics_port is not None:
            from . import metrics_port as mp

            metrics = mp.bind(host, metrics_port)
        try:
            return _serve(defn, settings, master, host, port, idle_timeout, echo, warm_up, archive, metrics)
        finally:
            if metrics is not None:
                mp.stop(metrics)


@contextmanager
def _serving(defn: PipelineDefinition | None, master: str):
    """Held while one engine of this master and fixed settings starts and runs: a second one is refused."""
    import fcntl

    path = state_path(defn, master).with_suffix(".serve.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            from ...spark.engine import EngineState

            running = EngineState.read(state_path(defn, master))
            where = f" at {running.url} (pid {running.pid})" if running else " (starting)"
            raise EngineError(f"an engine of master {redact_url(master)} already runs{where}: every pipeline on "
                              "that master uses it; stop it with 'minikafka engine stop'") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _serve(defn: PipelineDefinition | None, settings: dict[str, str], master: str, host: str, port: int,
           idle_timeout: float | None, echo, warm_up: bool, archive: Path | None = None, metrics=None) -> str:
    from ...spark import engine as eng

    problem = eng.port_problem(host, port)
    if problem:
        raise EngineError(f"port {port} on {host} is taken ({problem}): give another with --port N")
    stop = threading.Event()
    reason = {"why": "exited"}
    limit = {"s": idle_timeout}

    def on_signal(signum, _frame):
        reason["why"] = "signal"
        stop.set()

    from ...spark import engines

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    path = state_path(defn, master)
    log_path = path.with_suffix(".log") if os.environ.get("MINIKAFKA_ENGINE_LOG") != "-" else Path(os.devnull)
    name = f"minikafka engine ({redact_url(master)})"
    # its working directory is the user's engine directory, not the project of the pipeline that
    # started it: the sessions of every pipeline import their own shipped code, never a project's files
    jvm = eng.EngineProcess(eng.server_command(master=master, host=host, port=port, settings=settings, name=name),
                            log_path, env=_server_env(), cwd=path.parent)
    url = eng.remote_url("127.0.0.1" if host in ("0.0.0.0", "::") else host, port)
    try:
        t0 = time.perf_counter()
        if not jvm.wait_ready(host, port, cancelled=stop.is_set):  # a signal stops the wait too
            return reason["why"]
        jvm.lower_priority()
        if warm_up and not stop.is_set():
            _warm_up(url)
        checkpoint("engine:ready")  # it answers; nothing names it yet
        started = time.time()
        engines.forget_served(path)
        state = eng.EngineState(url, os.getpid(), jvm.pid, master, defn.name if defn else "default", started,
                                idle_timeout, str(log_path), engines.fingerprint(_fixed(defn)))
        state.write(path)
        idle = f", stops after {idle_timeout:g} s unused" if idle_timeout else ""
        served_at = ""
        if metrics is not None:
            from . import metrics_port as mp

            served_at = f", metrics at {mp.start(metrics, lambda: mp.engine_text(path, state, defn))}"
        echo(f"engine ready at {redact_url(url)} (master {redact_url(master)}, pid {os.getpid()}, started in "
             f"{time.perf_counter() - t0:.1f} s{idle}{served_at}); stop it with Ctrl-C or 'minikafka engine stop'")
        while not stop.wait(0.5):
            if not jvm.running():
                reason["why"] = "exited"
                break
            left = engines.stops_in(path, state)
            if left is not None and left <= 0:
                reason["why"] = "idle"
                limit["s"] = engines.idle_timeout_of(state, engines.read_lease(path))
                break
    finally:
        code = jvm.stop()
        if archive is not None:  # the class-data archive its JVM wrote as it exited (not when it was killed)
            from ...spark.stages.driver_jvm import keep_archive

            keep_archive(archive, ok=code in (0, JVM_SIGTERM_EXIT))
        state = eng.EngineState.read(path)
        if state is not None and state.pid == os.getpid():
            path.unlink(missing_ok=True)
        for s, handler in previous.items():
            signal.signal(s, handler)
    why = {"signal": "on request", "idle": f"after {limit['s'] or 0:g} s unused",
           "exited": f"(its JVM exited with code {code})"}
    echo(f"engine at {redact_url(url)} stopped {why[reason['why']]}")
    return reason["why"]


def _server_env() -> dict[str, str]:
    """The server's environment: its Python workers import what this process imports."""
    from ...util.procs import child_env

    return child_env()


def _warm_up(url: str) -> None:
    """One small stage's Spark work through a client (a JDBC read of a scratch ledger, the
    staged Parquet write), so the first real stage does not pay the JIT's first pass over it
    (measured: the first keep_articles on a new engine 6.3 s of Spark, the next 1.3 s)."""
    import tempfile

    from pydantic import BaseModel

    from ...api.source import Source
    from ...spark.engine import connect
    from ...spark.stages.read import read_topic
    from ...spark.staging import write_counted

    class Warm(BaseModel):
        url: str
        n: int

    try:
        spark = connect(url)
        try:
            spark.sql(WARMUP_SQL).collect()
            with tempfile.TemporaryDirectory(prefix="minikafka-warm-up-") as tmp, \
                    Source(f"{tmp}/warm.sqlite") as source:
                source.topic("warm", Warm, dedup=("url",)).extend([{"url": f"u{i}", "n": i} for i in range(2000)])
                frame = read_topic(spark, source, "warm", which="all")
                write_counted(frame.where("n % 2 = 0"), f"file://{tmp}/staged", row_group_bytes=8 << 20)
        finally:
            spark.stop()
    except Exception:  # noqa: BLE001 - a warm-up that fails only leaves the engine cold
        pass


def stop_engine(defn: PipelineDefinition | None, master: str | None = None, *, alone: bool = False) -> str | None:
    """Stop the running engine this pipeline uses on ``master``; return its URL, or None when none
    runs. ``alone``: only if no other pipeline used it since it started (``run --idle-timeout 0``
    does not stop an engine another pipeline's run shares; it stops after its own timeout)."""
    from ...spark.engines import choose, served

    path, state, _why = choose(_master(defn, master), _fixed(defn))
    if state is None:
        return None
    if alone and defn is not None:
        mine = str(Path(defn.path).resolve())
        if any(p["path"] != mine for p in served(path, state)):
            return None
    return stop_recorded(path, state)


def stop_recorded(path: Path, state) -> str | None:
    """Stop the engine recorded at ``path``; its URL, or None when it was not running."""
    from ...spark.engine import stop_pid

    stopped = stop_pid(state.pid)
    current = state.__class__.read(path)
    if current is None or current.pid == state.pid:
        path.unlink(missing_ok=True)
    return state.url if stopped else None


def stop_engines(master: str | None = None) -> list[str]:
    """Stop every running engine of this user (on ``master`` only, when given); their URLs."""
    from ...spark.engines import running

    return [url for path, state in running() if master is None or state.master == master
            for url in [stop_recorded(path, state)] if url]


@contextmanager
def _start_lock(master: str):
    import fcntl

    from ...spark.engines import start_lock_path

    path = start_lock_path(master)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_engine(defn: PipelineDefinition, *, master: str | None = None, idle_timeout: float | None = None,
                  echo=print) -> tuple[str, bool]:
    """(URL, started now) of an engine for ``defn`` on ``master`` (default: its own): the running
    engine of the user on that master whose fixed settings agree with the pipeline's, else a new
    background ``minikafka serve`` that stops after ``idle_timeout`` seconds unused (default:
    the pipeline's ``[engine] idle_timeout``); when another engine of the user runs, a line says
    why this run does not use it (another master, another fixed setting).

    Raises:
        EngineError: the new engine did not start (the last lines of its log say why).
    """
    from ...spark.engine import READY_TIMEOUT_S, EngineState
    from ...spark.engines import choose

    master = _master(defn, master)
    with _start_lock(master):
        found = _engine_coming_up(defn, master, echo)
        if found is not None:
            return found.url, False
        timeout = defn.engine.idle_timeout if idle_timeout is None else idle_timeout
        path, _none, why = choose(master, _fixed(defn))
        log = path.with_suffix(".serve.log")
        # 0: the run stops it at its end; the engine's own timeout is only the fallback. No
        # warm-up: this run's stages are the engine's first work (measured: the cold DAG about 1 s faster)
        cmd = [sys.executable, "-m", "minikafka.pipelines.launch.engine_main", "--pipeline",
               str(Path(defn.path).resolve()), "--source", str(Path(defn.source).resolve()), "--port", "0",
               "--idle-timeout", f"{timeout or 60:g}", "--no-warm-up", "--master", master]
        if why:
            echo(f"another engine: {why}")
        echo(f"starting an engine for {defn.name} " + (f"(stops after {timeout:g} s unused)" if timeout
                                                        else "(stops at the end of this run)"))
        path.parent.mkdir(parents=True, exist_ok=True)
        # appended (an engine started earlier may still write to it), unless it grew past 1 MB
        with open(log, "ab" if log.exists() and log.stat().st_size < 1 << 20 else "wb") as out:
            offset = out.tell()
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=_server_env())
        deadline = time.monotonic() + READY_TIMEOUT_S + 10
        while time.monotonic() < deadline:
            state = EngineState.read(path)
            if state is not None and state.pid == proc.pid:
                return state.url, True
            if proc.poll() is not None:
                found = find_engine(defn, master)  # another engine came up meanwhile (one a killed run started): use it
                if found is not None:
                    return found.url, False
                with open(log, "rb") as fh:
                    fh.seek(offset)
                    lines = [x for x in fh.read().decode(errors="replace").splitlines() if x.strip()]
                raise EngineError("the engine did not start: " + (lines[-1] if lines else f"exit code {proc.returncode}"))
            time.sleep(0.1)
        proc.terminate()
        raise EngineError(f"the engine did not start within {READY_TIMEOUT_S + 10:.0f} s; log: {log}")


def _serve_held(defn: PipelineDefinition, master: str) -> bool:
    """A ``serve`` of this master and the pipeline's fixed settings holds its lock: an engine is starting or runs."""
    import fcntl

    try:
        with open(state_path(defn, master).with_suffix(".serve.lock")) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
            return False
    except FileNotFoundError:
        return False


def _engine_coming_up(defn: PipelineDefinition, master: str, echo):
    """The running engine this pipeline uses; or, while a ``serve`` of its master and settings
    starts (one a run killed during its start left behind, or ``minikafka serve`` in a
    terminal), that engine once it is ready; None when none runs or starts (or it did not come
    up in time)."""
    from ...spark.engine import READY_TIMEOUT_S

    deadline = time.monotonic() + READY_TIMEOUT_S + 10
    told = False
    while True:
        found = find_engine(defn, master)
        if found is not None or not _serve_held(defn, master) or time.monotonic() > deadline:
            return found
        if not told:
            echo(f"waiting for the engine of {defn.name} that is starting")
            told = True
        time.sleep(0.2)


class EngineLease:
    """Marks an engine used while a run's stages use it (its idle timeout counts from the last
    mark), by this pipeline, which asks for ``idle_timeout`` (the run's, else ``[engine] idle_timeout``)."""

    def __init__(self, defn: PipelineDefinition, url: str | None = None, *, master: str | None = None,
                 idle_timeout: float | None = None):
        from ...spark.engine import parse_remote
        from ...spark.engines import running

        self.path = state_path(defn, master) if url is None else None
        if url is not None:  # the recorded engine at that URL (under its own key); none for one named by --remote
            for path, state in running():
                if parse_remote(state.url) == parse_remote(url):
                    self.path = path
                    break
        self.pipeline, self.pipeline_path = defn.name, str(Path(defn.path).resolve())
        self.idle_timeout = defn.engine.idle_timeout if idle_timeout is None else idle_timeout
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="minikafka-engine-lease", daemon=True)

    def _beat(self) -> None:
        from ...spark.engines import HEARTBEAT_S, mark_used

        if self.path is None:
            return
        mark_used(self.path, pipeline=self.pipeline, pipeline_path=self.pipeline_path, idle_timeout=self.idle_timeout)
        while not self._stop.wait(HEARTBEAT_S):
            mark_used(self.path)
        mark_used(self.path, pipeline=self.pipeline, pipeline_path=self.pipeline_path)

    def __enter__(self) -> EngineLease:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def named_engine(defn: PipelineDefinition, remote: str | None = None) -> str | None:
    """The engine a command uses when one is named: ``remote``, the pipeline's ``[engine]
    remote``, or (when neither names one) the engine running for this pipeline; else None.

    Raises:
        EngineError: a named engine does not answer.
    """
    from ...spark.engine import answers, parse_remote

    url = remote or defn.engine.remote
    if url:
        if not answers(*parse_remote(url), timeout=3.0):
            raise EngineError(f"no engine answers at {redact_url(url)}: start one with 'minikafka serve', or leave out "
                              "--remote; nothing was run")
        return url
    found = find_engine(defn)
    return found.url if found is not None else None


def engine_session(defn: PipelineDefinition, url: str, code_zip: str | None = None):
    """A client session of the engine at ``url`` with the pipeline's SQL settings; ``code_zip``
    (the jobs' and models' code) is shipped so the engine's Python workers import it."""
    from ...spark.engine import connect

    spark = connect(url, conf=defn.spark)
    if code_zip:
        spark.addArtifacts(code_zip, pyfile=True)
    return spark

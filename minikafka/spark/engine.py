"""A warm engine: one Spark Connect server that the stages of a run share.

Spark's fixed cost (a JVM, a SparkContext, the JIT's first pass) is paid once by the
server; each stage is a small client process (``pyspark.sql.connect``) that sends its
plan there and commits on this host as before. This module knows the server process:
the command that starts it (``spark-submit --class SparkConnectServer``, as Spark's own
``sbin/start-connect-server.sh`` does), when it is ready (it answers on its port), how
it stops (SIGTERM, then SIGKILL), and the state file a started engine leaves in the user's
engine directory (``engines``) so that later commands find it and ``engine stop`` can stop it.

It also holds what differs between a classic and a Connect session, so that the rest of
the engine reads ``master_of(spark)`` and ``parallelism(spark)`` on both.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import EngineError
from ..util.redact import redact_url

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark Connect's own default
DEFAULT_HOST = "127.0.0.1"  # a Connect server has no authentication: only this host, unless asked
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
# the engine's JVM below its clients: measured on the 1,000,000-row stage (2 cores), its commit
# 3.5 -> 3.3 s, the stage 4.0-4.4 -> 3.7-4.2 s
ENGINE_NICENESS = 10
RETRIES = 5  # a client's retries of a failed call: 0.05 + 0.2 + 0.8 + 2 + 2 s


# spark.sql settings Spark fixes when the JVM starts (its StaticSQLConf): a session cannot set them
STATIC_SQL = frozenset({
    "spark.sql.extensions", "spark.sql.catalogImplementation", "spark.sql.warehouse.dir",
    "spark.sql.globalTempDatabase", "spark.sql.queryExecutionListeners", "spark.sql.cache.serializer",
    "spark.sql.streaming.streamingQueryListeners", "spark.sql.ui.retainedExecutions",
    "spark.sql.sources.schemaStringLengthThreshold", "spark.sql.event.truncate.length",
    "spark.sql.legacy.sessionInitWithConfigDefaults", "spark.sql.streaming.ui.enabled",
    "spark.sql.defaultUrlStreamHandlerFactory.enabled", "spark.sql.broadcastExchange.maxThreadThreshold",
    "spark.sql.subquery.maxThreadThreshold", "spark.sql.metadataCacheTTLSeconds",
})


def is_fixed(key: str) -> bool:
    """The setting is fixed when the engine's JVM starts (a session cannot change it)."""
    return not key.startswith("spark.sql.") or key in STATIC_SQL or key.startswith("spark.sql.hive.")


def fixed_settings(conf: dict[str, str]) -> dict[str, str]:
    """The settings of ``conf`` (a ``[spark]`` table) an engine takes when its JVM starts."""
    return {k: str(v) for k, v in conf.items() if is_fixed(k)}


def session_settings(conf: dict[str, str]) -> dict[str, str]:
    """The settings of ``conf`` each session sets for itself (runtime ``spark.sql.*``)."""
    return {k: str(v) for k, v in conf.items() if not is_fixed(k)}


def remote_url(host: str, port: int) -> str:
    return f"sc://{host}:{port}"


ENGINE_URL_ENV = "MINIKAFKA_ENGINE_URL"  # a stage client's engine URL when it carries a token (--remote-env)


def parse_remote(url: str) -> tuple[str, int]:
    """(host, port) of ``sc://HOST:PORT`` (port default 15002).

    Raises:
        EngineError: not an ``sc://`` URL, or a port that is not a number.
    """
    if not isinstance(url, str) or not url.startswith("sc://"):
        raise EngineError(f"bad engine URL {redact_url(url)!r}: expected sc://HOST:PORT")
    rest = url[len("sc://"):].split("/", 1)[0].split(";", 1)[0]
    host, sep, port = rest.rpartition(":")
    if not sep:
        host, port = port, str(DEFAULT_PORT)
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise EngineError(f"bad engine URL {redact_url(url)!r}: expected sc://HOST:PORT")
    return host, int(port)


def answers(host: str, port: int, timeout: float = 0.5) -> bool:
    """Something accepts TCP connections at (host, port)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_problem(host: str, port: int) -> str | None:
    """Why the server could not listen on (host, port), or None when it can."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def free_port(host: str = DEFAULT_HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def server_command(*, master: str, host: str, port: int, settings: dict[str, str], name: str) -> list[str]:
    """The spark-submit command of a Connect server with ``settings`` (the session's and the pipeline's)."""
    import pyspark

    submit = str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
    conf = {**settings, "spark.connect.grpc.binding.port": str(port),
            "spark.connect.grpc.binding.address": host}
    cmd = [submit, "--class", SERVER_CLASS, "--master", master, "--name", name]
    jar = conf.get("spark.jars")
    if jar:
        cmd += ["--jars", jar, "--driver-class-path", jar]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    return cmd


@dataclass
class EngineState:
    """What a running engine leaves in its state file (removed when it stops)."""

    url: str
    pid: int  # the supervising ``minikafka serve`` process
    jvm_pid: int
    master: str
    pipeline: str  # the pipeline that started it (it serves every pipeline of its master: ``engines``)
    started_at: float
    idle_timeout: float | None = None
    log: str | None = None
    settings: dict[str, str] = field(default_factory=dict)  # its fixed settings, as digests (``engines.fingerprint``)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def read(cls, path: Path) -> EngineState | None:
        try:
            data = json.loads(path.read_text())
            known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
            return cls(**known)
        except (OSError, ValueError, TypeError, AttributeError):
            return None

    def alive(self) -> bool:
        """Its supervisor runs and the server answers."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return answers(*parse_remote(self.url))


class EngineProcess:
    """The server's JVM, started by this process and killed if this process dies."""

    def __init__(self, cmd: list[str], log_path: Path, env: dict[str, str] | None = None, cwd: Path | None = None):
        from ..util.procs import popen_tied

        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self.proc = popen_tied(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                   cwd=cwd)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def lower_priority(self, niceness: int = ENGINE_NICENESS) -> None:
        """Run the JVM's threads (and the Python workers they start later) ``niceness`` steps
        below normal CPU priority, so that on a busy machine its clients' work on the ledger's
        host (a stage's commit, the one step that cannot run in parallel) goes first.

        Linux keeps a priority per thread and a new thread takes its creator's, so each thread
        the JVM has is lowered (twice over: one may start meanwhile). Elsewhere, or when not
        allowed, nothing changes."""
        task_dir = Path(f"/proc/{self.proc.pid}/task")
        for _ in range(2):
            try:
                tids = [int(t) for t in os.listdir(task_dir)]
            except OSError:
                return
            for tid in tids:
                try:
                    if os.getpriority(os.PRIO_PROCESS, tid) < niceness:
                        os.setpriority(os.PRIO_PROCESS, tid, niceness)
                except OSError:  # the thread ended meanwhile, or not allowed
                    pass

    def wait_ready(self, host: str, port: int, timeout: float = READY_TIMEOUT_S, cancelled=None) -> bool:
        """Return True once the server answers on its port (False if ``cancelled()`` first).

        Raises:
            EngineError: the JVM exited first (with the last lines of its log) or did not
                answer within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        probe = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        while time.monotonic() < deadline:
            if not self.running():
                raise EngineError(f"the engine's JVM exited with code {self.proc.returncode} before it was ready:\n"
                                  + self.tail())
            if answers(probe, port, timeout=0.5):
                return True
            if cancelled is not None and cancelled():
                return False
            time.sleep(0.1)
        self.stop()
        raise EngineError(f"the engine did not answer on port {port} within {timeout:.0f} s; log: {self.log_path}")

    def tail(self, lines: int = 12) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        keep = [line for line in text if line.strip() and not line.startswith("\tat ")]
        return "\n".join(keep[-lines:])

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (Spark stops its context, the server its sessions), SIGKILL after ``timeout``."""
        if self.running():
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                from ..util.procs import kill_group

                kill_group(self.proc)
            except ProcessLookupError:
                pass
        return self.proc.poll()


def stop_pid(pid: int, timeout: float = STOP_TIMEOUT_S + 5) -> bool:
    """SIGTERM a ``minikafka serve`` process and wait until it has gone; False if it was not running."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)  # its JVM dies with it (parent-death signal)
    except ProcessLookupError:
        pass
    return True


def connect(url: str, *, conf: dict[str, str] | None = None, new: bool = False):
    """A Spark Connect session on the engine at ``url``, with the runtime SQL settings of ``conf``.

    ``new``: a client of its own even when this process has one already (pyspark otherwise hands
    back the process's active session, whatever ``url`` names).

    Raises:
        EngineError: nothing answers at ``url``.
        MissingDependencyError: the Connect client's packages are missing (the ``spark`` extra).
    """
    from ..util.optional import require

    require("pyspark", "spark")
    for module in ("grpc", "grpc_status", "google.rpc", "zstandard"):
        require(module, "spark")
    host, port = parse_remote(url)
    if not answers(host, port, timeout=3.0):
        raise EngineError(f"no engine answers at {redact_url(url)}: start one with 'minikafka serve', or run with "
                          "--engine submit")
    # pyspark's functions (F.col, ...) build Connect columns only in this mode
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    builder = RemoteSparkSession.builder.remote(url)
    spark = builder.create() if new else builder.getOrCreate()
    # an engine that went away fails the stage within seconds (Spark's default retries for 10 minutes)
    spark.client.set_retry_policies([_retry_policy(host, port)])
    spark.client.minikafka_engine = remote_url(host, port)  # stopped_engine() asks it again after a failure
    for key, value in session_settings(conf or {}).items():  # runtime settings; the others are the server's
        spark.conf.set(key, value)
    return spark


def _retry_policy(host: str, port: int):
    """Spark's default policy with ``RETRIES`` retries at most 2 s apart, and none once nothing
    listens on the engine's port (a killed engine: every call of a suite's checks would otherwise
    wait out its retries, about 5 s each)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    class EnginePolicy(DefaultPolicy):
        def can_retry(self, e: BaseException) -> bool:
            return super().can_retry(e) and answers(host, port, timeout=1.0)

    return EnginePolicy(max_retries=RETRIES, max_backoff=2000)


def engine_of(spark) -> str | None:
    """``sc://HOST:PORT`` of the engine of a Connect session made by ``connect`` (no token); None
    for a classic session (whose ``client`` raises) or no session."""
    if spark is None or not is_connect(spark):
        return None
    return getattr(spark.client, "minikafka_engine", None)


def stopped_engine(spark) -> str | None:
    """The URL (``sc://HOST:PORT``) of the engine of a Connect session made by ``connect`` when
    that engine no longer answers; None for a classic session or an engine that answers."""
    url = engine_of(spark)
    if url is None or answers(*parse_remote(url), timeout=1.0):
        return None
    return url


def engine_stopped_error(spark, stage: str) -> EngineError | None:
    """An ``EngineStoppedError`` naming the stage when its session's engine no longer answers:
    whatever a call to it raised (a quality check that could not run, a gRPC dump), the cause
    is the engine's."""
    from ..errors import EngineStoppedError
    from ..util.redact import redact_url

    url = stopped_engine(spark)
    if url is None:
        return None
    return EngineStoppedError(f"the engine at {redact_url(url)} stopped during stage {stage}; nothing was committed and its "
                              "inputs stay pending")


def is_connect(spark) -> bool:
    """``spark`` is a Spark Connect session (a client of an engine)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def master_of(spark) -> str:
    """The master URL of the session's application (classic or Connect)."""
    if not is_connect(spark):
        return spark.sparkContext.master
    return spark.conf.get("spark.master", "local[*]")


def parallelism(spark) -> int:
    """Spark's default parallelism (classic), or the engine's ``spark.default.parallelism`` (Connect)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    value = spark.conf.get("spark.default.parallelism", None)
    return int(value) if value and str(value).isdigit() else max(2, os.cpu_count() or 2)

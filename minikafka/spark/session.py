"""Build a SparkSession that can read the ledger: SQLite JDBC on the classpath, UTC, quiet."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import MasterUnreachableError, SparkSetupError
from ..util.optional import require
from ..util.redact import redact_url

DEFAULT_JDBC_JAR = "/usr/share/java/sqlite-jdbc.jar"
JDBC_JAR_ENV = "MINIKAFKA_SQLITE_JDBC_JAR"
JDBC_JAR_CONF = "spark.minikafka.jdbcJar"
VERBOSE_ENV = "MINIKAFKA_VERBOSE"  # set (the CLI's --verbose): the JVM's own output shows


MASTER_TIMEOUT_S = 3.0
DEFAULT_MASTER_PORT = 7077


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) of each master in ``spark://h1:p1,h2:p2`` (none for local, yarn, k8s://...).

    Raises:
        SparkSetupError: a spark:// URL without a host or with a port that is not a number.
    """
    if not master.startswith("spark://"):
        return []
    out = []
    for part in master[len("spark://"):].split(","):
        host, sep, port = part.strip().rstrip("/").rpartition(":")
        if not sep:
            host, port = port, str(DEFAULT_MASTER_PORT)
        host = host.strip("[]")  # [::1]:7077
        if not host or not port.isdigit():
            raise SparkSetupError(f"bad master URL {redact_url(master)!r}: expected spark://host:port[,host:port...]")
        out.append((host, int(port)))
    return out


def _reason(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "no answer (timed out)"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc})"
    return exc.strerror or str(exc) or type(exc).__name__


def check_master(master: str, *, timeout: float = MASTER_TIMEOUT_S) -> None:
    """Connect to each master of a ``spark://`` URL (``timeout`` seconds each) before a JVM starts.

    One master that accepts is enough (standby masters of a ZooKeeper setup may refuse).
    Other masters (local, yarn, k8s://) are not checked.

    Raises:
        MasterUnreachableError: no master accepts a TCP connection; names each and why.
    """
    addresses = master_addresses(master)
    failures = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            failures.append((redact_url(f"spark://{host}:{port}"), _reason(exc)))
    if len(failures) == 1:
        (url, why), = failures
        raise MasterUnreachableError(f"spark master at {url} is unreachable: {why}; nothing was submitted")
    if failures:
        each = "; ".join(f"{url}: {why}" for url, why in failures)
        raise MasterUnreachableError(f"all masters are unresponsive ({each}); nothing was submitted")


def jdbc_jar(configured: str | None = None) -> str:
    """The SQLite JDBC jar: ``configured`` (conf), else $MINIKAFKA_SQLITE_JDBC_JAR, else Debian's.

    Raises:
        SparkSetupError: the jar does not exist.
    """
    path = configured or os.environ.get(JDBC_JAR_ENV) or DEFAULT_JDBC_JAR
    if not Path(path).is_file():
        raise SparkSetupError(
            f"SQLite JDBC driver not found at {path}: install it with "
            f"'apt-get install libxerial-sqlite-jdbc-java', or point {JDBC_JAR_ENV} at a sqlite-jdbc jar"
        )
    return path


def check_java() -> None:
    """Raise SparkSetupError if no Java runtime is reachable, or ``$JAVA_HOME`` names one
    that is not there (spark-class runs ``$JAVA_HOME/bin/java`` whenever it is set, whatever
    is on PATH)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return
    if home:
        raise SparkSetupError(f"JAVA_HOME is {home}, which has no bin/java, and Spark starts Java from JAVA_HOME "
                              "whenever it is set (a java on PATH is not used): point it at a Java runtime, "
                              "or unset it")
    if shutil.which("java") is None:
        raise SparkSetupError("no Java runtime found: install it with 'apt-get install openjdk-17-jre-headless'")


def _collector_chosen() -> bool:
    """The JVM's environment already names a garbage collector (two would stop it starting)."""
    import re

    flags = " ".join(os.environ.get(v, "") for v in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"))
    return re.search(r"-XX:\+Use\w*GC\b", flags) is not None


def session_conf(*, jar: str, testing: bool = False, shuffle_partitions: int | None = None) -> dict[str, str]:
    """The Spark settings minikafka relies on (also used to build spark-submit commands)."""
    cores = os.cpu_count() or 2
    conf = {
        "spark.jars": jar,
        "spark.driver.extraClassPath": jar,
        "spark.executor.extraClassPath": jar,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(shuffle_partitions or max(2, 2 * cores)),
        "spark.default.parallelism": str(max(2, 2 * cores)),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # the parallel (throughput) collector: a local master runs all of Spark's work in the
        # driver JVM, and in batch work G1's concurrent bookkeeping costs CPU the commit needs
        # (measured: the first 1,000,000-row stage of a JVM 3-15% faster, four alternating pairs)
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC" + ("" if _collector_chosen() else " -XX:+UseParallelGC"),
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        JDBC_JAR_CONF: jar,
        # executors must run the interpreter that has minikafka, pydantic and pyarrow
        "spark.pyspark.python": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }
    if testing:
        conf.update({
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.adaptive.enabled": "false",
            "spark.driver.memory": "1g",
        })
    return conf


def build_session(app_name: str = "minikafka", master: str | None = None, *, jar: str | None = None,
                  conf: dict[str, str] | None = None, testing: bool = False, log_level: str = "ERROR"):
    """A SparkSession ready for minikafka (reuses the active one under spark-submit).

    Args:
        app_name: the application name.
        master: a master URL (``local[*]``, ``spark://host:7077``); default: $MASTER or local[*].
        jar: the SQLite JDBC jar (default: see ``jdbc_jar``).
        conf: extra Spark settings, applied last.
        testing: no UI, 2 shuffle partitions, 1g driver.
        log_level: Spark's log level.

    Raises:
        SparkSetupError: Java or the JDBC jar is missing.
        MissingDependencyError: pyspark is not installed.
    """
    require("pyspark", "spark")
    from pyspark.sql import SparkSession

    check_java()
    # pyspark picks the executors' interpreter from this variable when the context starts
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = session_conf(jar=jdbc_jar(jar), testing=testing)
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app_name)
    if master or not os.environ.get("PYSPARK_GATEWAY_PORT"):  # unset outside spark-submit
        builder = builder.master(master or os.environ.get("MASTER", "local[*]"))
    for key, value in settings.items():
        builder = builder.config(key, value)
    with jvm_output_hidden(not os.environ.get(VERBOSE_ENV)):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


@contextmanager
def jvm_output_hidden(hide: bool = True) -> Iterator[None]:
    """While a JVM starts, point file descriptor 2 at a scratch file.

    The JVM inherits it and writes its start-up noise and log lines there for its whole
    life; Python's own stderr is restored as soon as the JVM is up. The file is removed
    once the JVM started (errors reach Python as exceptions); if the start fails, its
    last lines are raised in a SparkSetupError.
    """
    if not hide:
        yield
        return
    fd, path = tempfile.mkstemp(prefix="minikafka-jvm-", suffix=".log")
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        os.dup2(fd, 2)
        yield
    except Exception as exc:
        os.dup2(saved, 2)
        tail = Path(path).read_text(errors="replace").strip().splitlines()[-15:]
        if "Java gateway process exited" in str(exc) and tail:
            raise SparkSetupError(f"the JVM did not start: {exc}\n" + "\n".join(tail)) from exc
        raise
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
        Path(path).unlink(missing_ok=True)

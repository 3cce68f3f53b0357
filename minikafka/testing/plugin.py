"""The pytest plugin (entry point ``pytest11``): fixtures to test a team's own stages.

- ``minikafka_ledger``: the path of a temporary ledger file (not created yet).
- ``minikafka_pipeline``: a factory, ``minikafka_pipeline("conf/pipeline.toml")``, giving a
  ``StageHarness`` on that ledger (topics and tables created): ``feed``, ``run_stage``,
  ``assert_output_equals``.
- ``minikafka_spark``: one classic SparkSession for the test session (local[2], test settings);
  ``minikafka_engine_url``: one Spark Connect engine for the test session, started on first use.

A project's own ``conftest.py`` may override ``minikafka_spark`` or ``minikafka_engine_url``
(to reuse a session it already has); the names never clash with a project's ``spark``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from .harness import StageHarness, temporary_code_zip

os.environ.setdefault("SPARK_TESTING", "1")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "spark: needs a JVM and the shared SparkSession")


@pytest.fixture(scope="session")
def minikafka_spark():
    """One classic SparkSession for the whole test run (an existing one is reused)."""
    pytest.importorskip("pyspark")
    from minikafka.spark.session import build_session

    session = build_session(app_name="minikafka-tests", master="local[2]", testing=True)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def minikafka_engine_url(tmp_path_factory):
    """The URL of one Spark Connect engine (local[2], test settings) for the whole test run."""
    pytest.importorskip("pyspark")
    from minikafka.spark.engine import EngineProcess, free_port, remote_url, server_command
    from minikafka.spark.session import jdbc_jar, session_conf
    from minikafka.util.procs import child_env

    port = free_port()
    cmd = server_command(master="local[2]", host="127.0.0.1", port=port, name="minikafka-tests-engine",
                         settings=session_conf(jar=jdbc_jar(), testing=True))
    engine = EngineProcess(cmd, tmp_path_factory.mktemp("engine") / "engine.log", env=child_env())
    try:
        engine.wait_ready("127.0.0.1", port)
        yield remote_url("127.0.0.1", port)
    finally:
        engine.stop()


@pytest.fixture
def minikafka_ledger(tmp_path) -> Path:
    """The path of a temporary ledger file (created by the first pipeline loaded onto it)."""
    return tmp_path / "ledger.sqlite"


@pytest.fixture
def minikafka_pipeline(request, minikafka_ledger):
    """``minikafka_pipeline(path)``: the pipeline file at ``path`` loaded onto the temporary
    ledger (its ``source`` redirected there), as a ``StageHarness``."""
    opened: list[StageHarness] = []
    connect_sessions: list = []
    scratch = tempfile.mkdtemp(prefix="minikafka-harness-")

    def sessions(engine: str, defn):
        classic = request.getfixturevalue("minikafka_spark")  # built before Connect mode is ever on
        if engine == "classic":
            return classic
        if connect_sessions:
            return connect_sessions[0]
        from minikafka.pipelines.launch.engine import engine_session

        session = engine_session(defn, request.getfixturevalue("minikafka_engine_url"), temporary_code_zip(defn, scratch))
        connect_sessions.append(session)
        return session

    def load(path: str | os.PathLike, *, ledger: str | os.PathLike | None = None) -> StageHarness:
        harness = StageHarness(path, ledger or minikafka_ledger, sessions)
        opened.append(harness)
        return harness

    yield load
    for harness in opened:
        harness.close()
    for session in connect_sessions:
        session.stop()
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    shutil.rmtree(scratch, ignore_errors=True)

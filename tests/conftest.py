"""Shared fixtures. Pure-ledger tests need no JVM; Spark tests share one session and, where
behaviour could differ between engines, ONE Spark Connect server for the whole test session
(``engine_url``, started on first use and stopped at the end; ``any_spark`` runs a test on both)."""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

import pytest
from pydantic import BaseModel

from minikafka import Source

# the fixtures the package ships for a team's tests (its pytest11 entry point names the same
# module, so an installed entry point does not register it twice)
pytest_plugins = ["minikafka.testing.plugin"]

os.environ.setdefault("SPARK_TESTING", "1")
# `minikafka run` without --engine: one spark-submit per stage, as the tests written for it expect;
# the engine's own tests say --engine auto/connect or --remote (tests/pipelines/test_engine_cli.py)
os.environ.setdefault("MINIKAFKA_ENGINE", "submit")
# a warm engine is recorded per user and master: the tests' engines are not the user's (nor another
# test run's on this machine), and each test gets an engine directory of its own (below)
ENGINES_BASE = tempfile.mkdtemp(prefix="minikafka-test-engines-")
os.environ["MINIKAFKA_ENGINE_DIR"] = ENGINES_BASE


@pytest.fixture(autouse=True)
def _engines_of_this_test(monkeypatch):
    """Every test records (and finds) warm engines in a directory of its own: an engine one
    test left up is never another test's."""
    engines = Path(ENGINES_BASE) / f"t{next(_TEST_NUMBERS)}"
    monkeypatch.setenv("MINIKAFKA_ENGINE_DIR", str(engines))
    yield
    if engines.is_dir():  # an engine the test left up (a page's `minikafka run`): not kept for its idle timeout
        from minikafka.spark.engines import running

        if running():
            from minikafka.pipelines.launch.engine import stop_engines

            stop_engines(None)


_TEST_NUMBERS = itertools.count()


class Video(BaseModel):
    creator: str
    url: str
    length_seconds: int


class Cleaned(BaseModel):
    creator: str
    url: str
    duration_min: int


@pytest.fixture
def source():
    with Source(":memory:") as src:
        yield src


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "ledger.sqlite")


@pytest.fixture
def file_source(db_path):
    with Source(db_path) as src:
        yield src


@pytest.fixture
def videos(source):
    return source.topic("videos", Video, dedup=("url",))


@pytest.fixture(scope="session")
def spark(minikafka_spark):
    """One SparkSession for the whole test run: the plugin's (minikafka.testing.plugin), so the
    suite and the harness share one JVM."""
    return minikafka_spark


CONNECT_ENV = "SPARK_CONNECT_MODE_ENABLED"  # pyspark's functions build Connect columns while it is set


@pytest.fixture(scope="session")
def engine_url(minikafka_engine_url):
    """The URL of the test session's engine: the plugin's one Spark Connect server (local[2],
    test settings), shared by the suite and the harness."""
    return minikafka_engine_url


@pytest.fixture(params=["classic", "connect"])
def any_spark(request, monkeypatch):
    """The test runs twice: on the shared classic session, then as a client of the shared engine."""
    classic = request.getfixturevalue("spark")  # built before Connect mode is ever switched on
    if request.param == "classic":
        monkeypatch.delenv(CONNECT_ENV, raising=False)
        yield classic
        return
    from minikafka.spark.engine import connect

    url = request.getfixturevalue("engine_url")
    monkeypatch.setenv(CONNECT_ENV, "1")  # connect() sets it; monkeypatch removes it afterwards
    session = connect(url, conf={"spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"})
    try:
        yield session
    finally:
        session.stop()
        os.environ.pop(CONNECT_ENV, None)


JVM_FIXTURES = {"spark", "engine_url", "any_spark", "minikafka_spark", "minikafka_engine_url"}
# the delivery how-to's receiver listens on the fixed port its page names: it runs with the JVM
# tests, on one worker, so no two runs of it overlap
FIXED_PORT_TESTS = ("[docs/how-to/delivery.md]",)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``-n 2 --dist loadgroup``, scripts/test.sh): every test that needs a
    JVM runs on one worker, in order, so the run keeps ONE SparkSession and ONE engine (a second
    JVM worker was tried: on two cores the two slowed each other and the suite took longer);
    the other tests share out over the workers a file at a time, so a file's module fixtures (a
    built wheel, a server on the port its examples name) are set up once, by one worker."""
    for item in items:
        jvm = item.get_closest_marker("spark") or JVM_FIXTURES & set(getattr(item, "fixturenames", ()))
        if jvm or any(part in item.nodeid for part in FIXED_PORT_TESTS):
            group = "jvm"
        else:
            group = item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))

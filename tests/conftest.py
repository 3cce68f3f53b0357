"""Shared fixtures. Pure-ledger tests need no JVM; Spark tests share one session."""

from __future__ import annotations

import os

import pytest
from pydantic import BaseModel

from minikafka import Source

os.environ.setdefault("SPARK_TESTING", "1")


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
def spark():
    """One SparkSession for the whole test run (local[1], no UI, small shuffles)."""
    pytest.importorskip("pyspark")
    from minikafka.spark.session import build_session

    session = build_session(app_name="minikafka-tests", master="local[2]", testing=True)
    yield session
    session.stop()

"""The JVM's start-up noise stays hidden unless --verbose (one small backfill each way)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from minikafka import Source
from tests.cli.helpers import Item, seed
from tests.pipelines.helpers import ROOT

pytestmark = pytest.mark.spark

NOISE = ("log4j", "NativeCodeLoader", "Setting default log level")


def _backfill(db_path, path, *extra):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MINIKAFKA_VERBOSE", None)
    return subprocess.run([sys.executable, "-m", "minikafka.cli", "backfill", *extra, "--source", db_path, "items",
                           str(path), "--master", "local[1]"], capture_output=True, text=True, env=env, timeout=300)


def test_backfill_hides_jvm_noise_and_verbose_shows_it(db_path, tmp_path):
    seed(db_path, n=0)
    quiet_file = tmp_path / "a.jsonl"
    quiet_file.write_text('{"title": "a", "url": "qa", "score": 1}\n')
    quiet = _backfill(db_path, quiet_file)
    assert quiet.returncode == 0, quiet.stderr
    assert not any(n in quiet.stderr for n in NOISE), quiet.stderr
    assert "1 loaded" in quiet.stderr and "--verbose" in quiet.stderr
    loud_file = tmp_path / "b.jsonl"
    loud_file.write_text('{"title": "b", "url": "qb", "score": 2}\n')
    loud = _backfill(db_path, loud_file, "--verbose")
    assert loud.returncode == 0 and any(n in loud.stderr for n in NOISE), loud.stderr
    with Source(db_path) as src:
        assert sorted(m.url for m in src.topic("items", Item, dedup=("url",)).iter_new()) == ["qa", "qb"]

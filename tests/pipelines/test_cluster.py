"""The example pipeline on a real Spark standalone cluster (127.0.0.1) gives local mode's results."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minikafka import Source
from minikafka.pipelines.cluster import standalone_cluster
from schemas.homelab import Scored
from tests.pipelines.helpers import ROOT, generate, homelab_copy

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def scored(path) -> dict:
    with Source(str(path)) as src:
        return {s.url: (s.score, s.category, s.kind) for s in src.topic("rss.scored", Scored, dedup=("url",)).iter_new()}


def mk(*args):
    return subprocess.run([sys.executable, "-m", "minikafka.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=900, cwd=ROOT)


def test_cluster_results_equal_local_results(tmp_path):
    dump = generate(tmp_path, 200)
    results = {}
    for mode in ("local", "cluster"):
        home = tmp_path / mode
        home.mkdir()
        pipeline = homelab_copy(home)
        assert mk("ingest", pipeline, "rss.items", dump).returncode == 0
        if mode == "local":
            run = mk("run", pipeline, "--in-process", "--master", "local[2]")
        else:
            with standalone_cluster(log_dir=tmp_path / "spark-logs") as url:
                run = mk("run", pipeline, "--in-process", "--master", url)
        assert run.returncode == 0, run.stdout + run.stderr
        results[mode] = scored(home / "homelab.sqlite")
    assert results["cluster"] == results["local"] and len(results["local"]) > 150

"""A stage with lookups killed with SIGKILL at every fault point of its run (its lookup's cached
copy half in place included), then re-run: the ledger ends exactly as after one clean run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.spark import run_stage
from minikafka.util.faults import ENV
from tests.spark.crash_lookup_child import Item, Label, Labelled, open_topics, stage

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
N = 2000


def seed(path: str) -> None:
    with Source(path) as src:
        open_topics(src)
        src.topic("items", Item, dedup=("url",)).extend([{"url": f"u{i}", "n": i % 50} for i in range(N)])
        src.topic("labels", Label, dedup=("n",)).extend([{"n": i, "label": f"l{i}"} for i in range(40)])
        weights = src.table("weights", Label, key="n")
        weights.upsert_many([{"n": i, "label": f"old{i}"} for i in range(30)])
        weights.upsert_many([{"n": i, "label": f"w{i}"} for i in range(10)])  # superseding versions


def snapshot(path: str) -> dict:
    with Source(path) as src:
        open_topics(src)
        rows = sorted((r["url"], r["label"], r["weight"])
                      for r in src.topic("labelled", Labelled, dedup=None).to_arrow().to_pylist())
        items = src.topic("items", Item, dedup=("url",))
        runs = [r for r in src.runs(stage="label", limit=50) if r["status"] == "succeeded" and r["rows_out"]]
        consumers = {t: src.topic(t, Label, dedup=("n",)).consumers() for t in ("labels",)}
        return {"labelled": rows, "items_new": items.count("new"), "items_handled": items.count("handled"),
                "committed_runs": len(runs), "lookup_consumers": consumers}


def kill_at(path: str, point: str) -> None:
    env = {**os.environ, ENV: point, "PYTHONPATH": str(ROOT)}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    proc = subprocess.Popen([sys.executable, "-m", "tests.spark.crash_lookup_child", path], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.time() + 240
    for line in proc.stderr:
        if line.startswith(f"FROZEN {point}"):
            break
        if time.time() > deadline:
            break
    else:
        proc.wait()
        pytest.fail(f"the stage process ended before reaching {point} (exit {proc.returncode})")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


@pytest.fixture(scope="module")
def clean_result(tmp_path_factory, spark):
    path = str(tmp_path_factory.mktemp("clean") / "ledger.sqlite")
    seed(path)
    with Source(path) as src:
        open_topics(src)
        run_stage(spark, src, stage())
    return snapshot(path)


@pytest.mark.parametrize("point", ["stage:read", "lookup:copy-written", "stage:staged", "commit:outputs-inserted",
                                   "commit:before-commit", "commit:after-commit"])
def test_a_lookup_stage_killed_at_any_point_then_rerun_gives_the_clean_result(spark, tmp_path, clean_result, point):
    path = str(tmp_path / "ledger.sqlite")
    seed(path)
    kill_at(path, point)
    with Source(path) as src:
        open_topics(src)
        after_kill = src.topic("labelled", Labelled, dedup=None).count()
        run_stage(spark, src, stage())
        run_stage(spark, src, stage())  # and once more: nothing left to do
    assert after_kill == (N if point == "commit:after-commit" else 0)
    expected = {(f"u{i}", f"l{i % 50}" if i % 50 < 40 else None,
                 f"w{i % 50}" if i % 50 < 10 else f"old{i % 50}" if i % 50 < 30 else None) for i in range(N)}
    assert set(clean_result["labelled"]) == expected and len(clean_result["labelled"]) == N
    assert snapshot(path) == clean_result
    assert clean_result["lookup_consumers"] == {"labels": []}

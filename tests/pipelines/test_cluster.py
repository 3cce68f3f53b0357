"""The example pipeline on a real Spark standalone cluster whose worker cannot see the ledger.

The worker runs in its own mount namespace with a tmpfs over the directory holding the
ledger and the pipeline's files, as if it ran on another host; only the staging
directory is visible to both sides. First the test shows it can fail (staging turned
off: the executors cannot read the ledger and nothing is committed); then the pipeline
runs per stage (spark-submit, its first stage), in-process, and on a warm engine whose master is the cluster,
all through staging, and every ledger ends identical to a local-mode run on the same data.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from minikafka.pipelines import load_pipeline
from minikafka.pipelines.launch.cluster import standalone_cluster, unshare_permitted
from minikafka.pipelines.runner import run_pipeline
from tests.pipelines.helpers import ROOT, generate, homelab_copy

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPICS = ("rss.items", "rss.youtube", "rss.articles", "rss.summaries", "rss.scored")


def snapshot(path) -> dict:
    """Every topic's rows (fields and status, no times or run ids), the quarantine and the acks."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        for topic in TOPICS:
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{topic}:status")')  # the true status view
                    if not r[1].startswith("_") or r[1] == "_status"]
            out[topic] = sorted(conn.execute(f'SELECT {", ".join(f"{c!r}" for c in cols)} FROM "{topic}:status"')
                                .fetchall(), key=repr)
        out["quarantine"] = sorted(conn.execute("SELECT topic, reason FROM _minikafka_quarantine").fetchall())
        return out
    finally:
        conn.close()


def fields_of(path, topic: str) -> list:
    """A topic's rows, model fields only (no status: it depends on which later stages ran)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{topic}")') if not r[1].startswith("_")]
        return sorted(conn.execute(f'SELECT {", ".join(f"{c!r}" for c in cols)} FROM "{topic}"').fetchall(), key=repr)
    finally:
        conn.close()


def mk(*args, engine: str = "submit", timeout: float = 600):
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(ROOT), "MINIKAFKA_ENGINE": engine}
    return subprocess.run([sys.executable, "-m", "minikafka.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def prepared(home, dump):
    home.mkdir(parents=True)
    pipeline = homelab_copy(home)
    ingest = mk("ingest", pipeline, "rss.items", dump)
    assert ingest.returncode == 0, ingest.stderr
    return pipeline


def test_example_on_an_isolated_worker_matches_local_mode_and_fails_without_staging(spark, tmp_path):
    why = unshare_permitted()
    if why:
        pytest.skip(why)
    hidden = tmp_path / "ledgers"  # the driver's side only: ledgers, pipeline files, dumps
    shared = tmp_path / "shared"   # staging: visible to the driver and the worker
    shared.mkdir()
    hidden.mkdir()
    dump = generate(hidden, 120)

    local = prepared(hidden / "local", dump)
    # the reference: local mode, in this process's session (spares a JVM start)
    reference = run_pipeline(load_pipeline(local), master="local[2]", in_process=True, echo=lambda m: None)
    assert reference.ok, reference.table()
    expected = snapshot(hidden / "local" / "homelab.sqlite")
    assert len(expected["rss.scored"]) > 80

    failing = prepared(hidden / "failing", dump)
    submitted = prepared(hidden / "submitted", dump)
    in_process = prepared(hidden / "in_process", dump)
    on_engine = prepared(hidden / "on_engine", dump)
    before = snapshot(hidden / "failing" / "homelab.sqlite")
    with standalone_cluster(port=None, log_dir=tmp_path / "spark", hide=[hidden]) as url:
        # staging turned off: executors on the worker try to open the ledger and cannot
        run = mk("run", failing, "--in-process", "--master", url, "--staging", "local", "--stage", "keep_articles")
        assert run.returncode == 1, run.stdout + run.stderr
        assert "homelab.sqlite" in run.stdout and "does not exist" in run.stdout, run.stdout
        assert snapshot(hidden / "failing" / "homelab.sqlite") == before

        # one stage per spark-submit: the first stage shows it (each submit starts an application
        # on the cluster, about half a minute each; the DAG's order per submit is tested locally)
        run = mk("run", submitted, "--master", url, "--staging", f"file://{shared}", "--stage", "keep_articles")
        assert run.returncode == 0, run.stdout + run.stderr
        run = mk("run", in_process, "--in-process", "--master", url, "--staging", str(shared))
        assert run.returncode == 0, run.stdout + run.stderr
        # last (its executors stay while stages keep coming): a warm engine on this
        # host with the cluster as its master, each stage a client of it
        engine = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "serve", "--pipeline", str(on_engine),
                                   "--master", url, "--port", "0"], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        try:
            ready = engine.stdout.readline()
            assert ready.startswith("engine ready at sc://"), ready + engine.stderr.read()
            run = mk("run", on_engine, "--remote", ready.split()[3], "--staging", f"file://{shared}")
            assert run.returncode == 0, run.stdout + run.stderr
        finally:
            engine.send_signal(signal.SIGTERM)
            assert engine.wait(timeout=120) == 0
    articles = fields_of(hidden / "local" / "homelab.sqlite", "rss.articles")
    assert articles and fields_of(hidden / "submitted" / "homelab.sqlite", "rss.articles") == articles
    assert snapshot(hidden / "in_process" / "homelab.sqlite") == expected
    assert snapshot(hidden / "on_engine" / "homelab.sqlite") == expected
    assert list(shared.iterdir()) == [] or all(not any(p.iterdir()) for p in shared.iterdir())


def test_an_idle_engine_on_a_cluster_gives_its_cores_back_and_another_pipeline_runs_at_once(tmp_path):
    """The engine a default run leaves up on a 2-core standalone cluster holds no executor once
    idle: an in-process run of another pipeline started at once gets the cores and finishes."""
    from minikafka.spark.engines import recorded

    shared = tmp_path / "shared"
    shared.mkdir()
    dump = generate(tmp_path, 20)
    first, second = prepared(tmp_path / "first", dump), prepared(tmp_path / "second", dump)
    with standalone_cluster(port=None, log_dir=tmp_path / "spark") as url:
        try:
            run = mk("run", first, "--master", url, "--staging", shared, "--stage", "keep_articles", engine="auto")
            assert run.returncode == 0, run.stdout + run.stderr
            (_path, state), = recorded()
            assert state.alive()  # idle, up
            try:
                run = mk("run", second, "--in-process", "--master", url, "--staging", shared, "--stage",
                         "keep_articles", timeout=240)
            except subprocess.TimeoutExpired:
                pytest.fail("the second application got no core from the idle engine's cluster in 240 s")
            assert run.returncode == 0, run.stdout + run.stderr
        finally:
            mk("serve", "--stop", "--pipeline", first)

"""minikafka watch on Spark: same ledger as run, chunked backlogs, failing stages, SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from minikafka import Source
from minikafka.connectors.ingest import ingest_jsonl
from minikafka.ledger.topics import quote_identifier
from minikafka.pipelines import load_pipeline
from minikafka.pipelines.opening import open_source
from minikafka.pipelines.runner import run_pipeline
from minikafka.pipelines.watch import Watch, WatchResult
from tests.pipelines.helpers import ROOT, generate, homelab_copy

pytestmark = pytest.mark.spark


def ingest(defn, path):
    with open_source(defn) as src:
        return ingest_jsonl(src._topics["rss.items"], path)


def ledger_state(defn) -> dict:
    """Every topic's rows (fields and status, no ids or times) and the quarantine, comparable across files."""
    state = {}
    with Source(str(defn.source)) as source:
        conn = source._ledger.conn
        for name in defn.topics:
            layout = source.layout(name)
            cols = ", ".join(quote_identifier(c) for c in [*layout.field_names, "_status"])
            view = quote_identifier(name + ":status")  # the true status of every row
            state[name] = sorted(conn.execute(f"SELECT {cols} FROM {view}").fetchall())
        state["quarantine"] = sorted(conn.execute(
            "SELECT topic, consumer, payload, reason FROM _minikafka_quarantine").fetchall())
    return state


def test_watch_until_idle_on_the_example_pipeline_gives_the_same_ledger_as_run(spark, tmp_path):
    dump = generate(tmp_path, 200)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    by_run = load_pipeline(homelab_copy(tmp_path / "a"))
    by_watch = load_pipeline(homelab_copy(tmp_path / "b"))
    ingest(by_run, dump), ingest(by_watch, dump)
    assert run_pipeline(by_run, in_process=True, echo=lambda m: None).ok
    lines = []
    result = Watch(by_watch, spark=spark, until_idle=True, echo=lines.append).run()
    assert result.ok and [o.name for o in result.outcomes] == [s.name for s in by_watch.stages]
    assert len([line for line in lines if "succeeded" in line]) == 6  # one status line per run
    assert ledger_state(by_watch) == ledger_state(by_run)
    assert Watch(by_watch, spark=spark, until_idle=True, echo=lambda m: None).run().outcomes == []


def test_a_window_of_rows_processes_a_backlog_in_chunks_each_its_own_commit(spark, tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path, replace={
        'name = "keep_articles"\njob = "jobs.keep_articles"':
        'name = "keep_articles"\njob = "jobs.keep_articles"\nwindow = { rows = 40 }'}))
    loaded = ingest(defn, generate(tmp_path, 120)).appended
    result = run_pipeline(defn, in_process=True, stage="keep_articles", echo=lambda m: None)
    assert result.ok
    runs = [r for r in Source(str(defn.source)).runs(stage="keep_articles", limit=50)]
    chunks = sorted(runs, key=lambda r: r["started_at"])
    assert [r["rows_in"] for r in chunks] == [40] * (loaded // 40) + ([loaded % 40] if loaded % 40 else [])
    assert all(r["status"] == "succeeded" for r in chunks)
    assert result.outcomes[0].run["rows_in"] == loaded and result.outcomes[0].run["details"]["chunks"] == len(chunks)
    assert chunks[1]["run_id"] == chunks[0]["run_id"] + ".2"


def test_a_failing_stage_is_logged_and_backed_off_while_the_others_go_on(spark, tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path, replace={'job = "jobs.keep_articles"':
                                                         'job = "tests.pipelines.failing_job"'}))
    ingest(defn, generate(tmp_path, 60))
    lines = []
    result = Watch(defn, spark=spark, until_idle=True, echo=lines.append).run()
    status = {o.name: o.status for o in result.outcomes}
    assert status == {"split_youtube": "succeeded", "keep_articles": "failed", "transcribe": "succeeded",
                      "score": "succeeded", "feed_day": "succeeded"}
    assert any("keep_articles" in line and "ERROR" in line and "broken on purpose" in line for line in lines)
    watch = Watch(defn, spark=spark, echo=lines.append, backoff=(30.0, 60.0))
    later = WatchResult()
    assert not watch._pass(later)  # first look at the pending rows: debounced
    watch.states["keep_articles"].changed_at -= 1
    assert watch._pass(later) and [(o.name, o.status) for o in later.outcomes] == [("keep_articles", "failed")]
    assert watch.states["keep_articles"].backoff_until > time.monotonic() + 20
    assert not watch._pass(later)  # backed off: it does not run again yet


def test_sigterm_finishes_the_run_in_flight_and_exits_0(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path))
    ingest(defn, generate(tmp_path, 100))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "watch", str(defn.path)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if "split_youtube" in line and "succeeded" in line:
            break
        assert line or proc.poll() is None, "".join(seen)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "run(s)" in out
    with Source(str(defn.source)) as source:
        assert all(r["status"] != "running" for r in source.runs(limit=100))


def test_a_window_of_rows_also_chunks_a_stage_run_by_spark_submit(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path, replace={
        'name = "keep_articles"\njob = "jobs.keep_articles"':
        'name = "keep_articles"\njob = "jobs.keep_articles"\nwindow = { rows = 50 }'}))
    loaded = ingest(defn, generate(tmp_path, 80)).appended
    result = run_pipeline(defn, stage="keep_articles", echo=lambda m: None)
    assert result.ok, result.table()
    row = result.outcomes[0].run
    assert row["rows_in"] == loaded and row["details"]["chunks"] == 2
    with Source(str(defn.source)) as source:
        assert sorted(r["rows_in"] for r in source.runs(stage="keep_articles")) == sorted([50, loaded - 50])

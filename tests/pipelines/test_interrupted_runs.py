"""Ctrl-C (SIGINT to the real process) during `run` and `backfill`: exit code 130, the run in
flight recorded as 'interrupted', nothing of it committed, a re-run does the work."""

from __future__ import annotations

import json
import os
import signal

import pytest

from minikafka import Source
from schemas.homelab import RssItem
from tests.cli.helpers import Item, invoke, seed
from tests.cli.test_interrupts import mk, wait_for, wait_for_line
from tests.pipelines.helpers import generate, homelab_copy
from tests.util.procscan import marked_pids

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _pipeline_with_rows(tmp_path):
    pipeline = homelab_copy(tmp_path)
    assert invoke("ingest", pipeline, "rss.items", generate(tmp_path, 40)).exit_code == 0
    return pipeline, tmp_path / "homelab.sqlite"


def _interrupted_runs(db, stage):
    with Source(str(db)) as src:
        return [r for r in src.runs(stage=stage, limit=50) if r["status"] == "interrupted"]


def test_ctrl_c_while_spark_submit_runs_a_stage_exits_130_and_records_it_interrupted(tmp_path):
    pipeline, db = _pipeline_with_rows(tmp_path)
    proc = mk("run", pipeline, "--stage", "split_youtube")
    wait_for_line(proc.stderr, "-> split_youtube")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    (run,) = _interrupted_runs(db, "split_youtube")  # one row, under load too (the run id has one writer)
    assert run["error"] == "interrupted by Ctrl-C (SIGINT)" and run["rows_out"] == 0
    with Source(str(db)) as src:
        assert src.topic("rss.youtube", RssItem, dedup=("url",)).count() == 0
        assert src.topic("rss.items", RssItem, dedup=("url",)).count("new") > 0


def test_sigterm_while_a_stage_runs_exits_143_records_it_and_leaves_no_stage_process(tmp_path):
    """cron's ``timeout`` and ``systemctl stop`` send SIGTERM to the run alone: the stage in
    flight is stopped and recorded as Ctrl-C's is, with the signal named."""
    pipeline, db = _pipeline_with_rows(tmp_path)
    marker = f"sigterm-{os.getpid()}-{tmp_path.name}"
    proc = mk("run", pipeline, "--stage", "split_youtube", env={"MK_TEST_MARKER": marker})
    wait_for_line(proc.stderr, "-> split_youtube")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "stopped (SIGTERM)" in err and "Traceback" not in err
    (run,) = _interrupted_runs(db, "split_youtube")
    assert run["error"] == "stopped by SIGTERM" and run["rows_out"] == 0
    wait_for(lambda: not marked_pids("MK_TEST_MARKER", marker), timeout=30)  # the stage's JVM went with it
    with Source(str(db)) as src:
        assert src.topic("rss.youtube", RssItem, dedup=("url",)).count() == 0
        assert src.topic("rss.items", RssItem, dedup=("url",)).count("new") > 0


def test_ctrl_c_in_an_in_process_stage_before_its_commit_exits_130_and_commits_nothing(tmp_path):
    pipeline, db = _pipeline_with_rows(tmp_path)
    proc = mk("run", pipeline, "--stage", "split_youtube", "--in-process",
              env={"MINIKAFKA_FREEZE_AT": "stage:staged"})
    wait_for_line(proc.stderr, "FROZEN stage:staged", timeout=300)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    (run,) = _interrupted_runs(db, "split_youtube")
    assert run["rows_in"] > 0 and run["rows_out"] == 0
    with Source(str(db)) as src:
        assert src.topic("rss.youtube", RssItem, dedup=("url",)).count() == 0
        assert src.topic("rss.items", RssItem, dedup=("url",)).count("new", consumer="split_youtube") == run["rows_in"]


def test_ctrl_c_during_backfill_exits_130_records_it_and_a_rerun_loads_the_rest(db_path, tmp_path):
    seed(db_path, n=0)
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps({"title": f"t{i}", "url": f"b{i}", "score": i}) + "\n" for i in range(30)))
    proc = mk("backfill", "--source", db_path, "items", dump, "--master", "local[1]", "--batch-rows", "10",
              env={"MINIKAFKA_FREEZE_AT": "backfill:batch-committed"})
    wait_for_line(proc.stderr, "FROZEN backfill:batch-committed", timeout=300)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    with Source(db_path) as src:
        (run,) = src.runs(limit=1)
        assert (run["kind"], run["status"]) == ("backfill", "interrupted")
        kept = src.topic("items", Item, dedup=("url",)).count()
        assert 0 < kept < 30  # the batch committed before Ctrl-C stays
    again = mk("backfill", "--source", db_path, "items", dump, "--master", "local[1]", "--json")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    report = json.loads(out)  # stdout holds the one JSON object, the summary went to stderr
    assert report["status"] == "succeeded" and report["rows_loaded"] == 30 - kept and report["files"] == [str(dump)]
    assert "backfill items:" in err
    with Source(db_path) as src:
        assert src.topic("items", Item, dedup=("url",)).count() == 30

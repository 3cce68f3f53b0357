"""The pipeline commands through the real `minikafka` entry point (spark-submit per stage)."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from minikafka import Source
from schemas.homelab import RssItem
from tests.pipelines.helpers import ROOT, generate, homelab_copy

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def mk(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


def test_run_stage_with_spark_submit_then_plan_plot_export(tmp_path):
    pipeline = homelab_copy(tmp_path)
    dump = generate(tmp_path, 80)
    ingested = mk("ingest", pipeline, "rss.items", dump)
    assert ingested.returncode == 0, ingested.stderr
    run = mk("run", pipeline, "--stage", "split_youtube")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "split_youtube          succeeded" in run.stdout and "total" in run.stdout
    db = tmp_path / "homelab.sqlite"
    with Source(str(db)) as src:
        youtube = src.topic("rss.youtube", RssItem, dedup=("url",))
        assert youtube.count() > 0
        assert all("youtube.com" in r.url for r in youtube.iter_new())
        assert src.runs(stage="split_youtube")[0]["status"] == "succeeded"

    plan = mk("plan", pipeline, "--from", "transcribe", "--master", "spark://127.0.0.1:7077")
    lines = [line for line in plan.stdout.strip().splitlines() if not line.startswith("#")]
    assert len(lines) == 4 and "spark-submit --master spark://127.0.0.1:7077" in lines[0]
    assert "jobs/transcribe.py --pipeline" in lines[0] and "jobs/score.py" in lines[1]
    assert "jobs/transcribe.py --pipeline" in lines[2] and "--remote sc://HOST:PORT --py-files" in lines[2]
    assert "spark-submit" not in lines[3] and "jobs/score.py" in lines[3]

    plot = mk("plot", pipeline, "--counts")
    assert 'rss_youtube["rss.youtube<br/>new: ' in plot.stdout and "rss_items -->|split_youtube| rss_youtube" in plot.stdout

    out = tmp_path / "youtube.parquet"
    exported = mk("export", "rss.youtube", "--format", "parquet", out, "--source", db)
    assert exported.returncode == 0 and pq.read_table(out).num_rows > 0
    jl = tmp_path / "youtube.jsonl"
    mk("export", "rss.youtube", "--format", "jsonl", jl, "--source", db)
    first = json.loads(jl.read_text().splitlines()[0])
    assert first["url"].startswith("https://www.youtube.com/") and first["_status"] == "new"


def test_exit_codes_for_cron(tmp_path):
    broken = homelab_copy(tmp_path, replace={'job = "jobs.score"': 'job = "jobs.nope"'})
    bad = mk("run", broken)
    assert bad.returncode == 2 and "cannot import job module 'jobs.nope'" in bad.stderr
    failing = tmp_path / "failing"
    failing.mkdir()
    pipeline = homelab_copy(failing, replace={'job = "jobs.split_youtube"': 'job = "tests.pipelines.failing_job"'})
    mk("ingest", pipeline, "rss.items", generate(failing, 20))
    run = mk("run", pipeline, "--stage", "split_youtube")
    assert run.returncode == 1 and "broken on purpose" in run.stdout


def test_check_reports_suites_without_committing(tmp_path):
    pipeline = homelab_copy(tmp_path)
    mk("ingest", pipeline, "rss.items", generate(tmp_path, 60))
    out = mk("check", pipeline, "--stage", "split_youtube")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "split_youtube: suite youtube (fail): passed" in out.stdout
    assert "ok   expect_column_values_to_match_regex(url)" in out.stdout
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        assert src.topic("rss.youtube", RssItem, dedup=("url",)).count() == 0

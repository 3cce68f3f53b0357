"""`minikafka run` says when a new stage starts past rows that exist (start = "latest" in the pipeline file).

The stage has nothing pending, so `run` records its empty run without starting a JVM.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone

import pytest

from minikafka import Source
from minikafka.pipelines import load_pipeline
from schemas.homelab import Summary
from tests.pipelines.helpers import ROOT, homelab_copy

LATEST = {'name = "score"\njob = "jobs.score"': 'name = "score"\njob = "jobs.score"\nstart = "latest"'}
NOTE = ("stage score: consumer starts at offset 3 of topic 'rss.summaries', 3 earlier rows are skipped "
        "(start=latest)")


def mk(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


@pytest.fixture
def pipeline(tmp_path):
    path = homelab_copy(tmp_path, replace=LATEST)
    with Source(str(tmp_path / "homelab.sqlite")) as src:  # summaries written before the stage existed
        src.topic("rss.summaries", Summary, dedup=("url",)).extend([
            {"url": f"https://example.org/{i}", "title": "t", "kind": "article", "summary": "s", "words": 1,
             "published": datetime(2025, 1, 1, tzinfo=timezone.utc)} for i in range(3)])
    return path


def test_run_says_a_new_stage_with_start_latest_skips_the_rows_that_exist_then_says_nothing_more(pipeline):
    dry = mk("run", pipeline, "--stage", "score", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert NOTE + " (dry run: nothing registered)" in dry.stderr  # progress lines go to stderr, the table to stdout
    first = mk("run", pipeline, "--stage", "score")
    assert first.returncode == 0, first.stdout + first.stderr
    assert NOTE in first.stderr and "(dry run" not in first.stderr
    assert "score                  succeeded" in first.stdout
    again = mk("run", pipeline, "--stage", "score")
    assert again.returncode == 0 and "starts at offset" not in again.stderr + again.stdout
    with Source(str(load_pipeline(pipeline).source)) as src:
        summaries = src.topic("rss.summaries", Summary, dedup=("url",))
        assert summaries.count("new", consumer="score") == 0 and src.runs(stage="score")[0]["rows_in"] == 0


def test_the_pipeline_file_refuses_a_start_it_does_not_know(tmp_path):
    from minikafka.pipelines.definition import PipelineDefinitionError

    path = homelab_copy(tmp_path, replace={
        'name = "score"\njob = "jobs.score"': 'name = "score"\njob = "jobs.score"\nstart = "newest"'})
    with pytest.raises(PipelineDefinitionError, match=r"stages\.score\.start.*'earliest'.*newest"):
        load_pipeline(path)

"""The scheduler of a run: independent stages side by side, strict and best_effort, outcomes in DAG order."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from minikafka import Source
from minikafka.ledger.consuming import INTERRUPTED
from minikafka.pipelines import load_pipeline
from minikafka.pipelines.failures import record_failed_run
from minikafka.pipelines.results import PipelineRun, StageOutcome
from minikafka.pipelines.runner import run_scheduled
from tests.pipelines.helpers import homelab_copy


class Launcher:
    """Stands in for a stage's process: records which stages overlap, fails the ones named."""

    def __init__(self, fail=(), seconds: float = 0.2):
        self.fail, self.seconds = set(fail), seconds
        self.lock = threading.Lock()
        self.running: set[str] = set()
        self.overlaps: set[frozenset] = set()
        self.started: list[str] = []

    def __call__(self, sd, run_id, procs) -> StageOutcome:  # run_id: the stage's run; procs: the run's _Children
        with self.lock:
            self.started.append(sd.name)
            for other in self.running:
                self.overlaps.add(frozenset((sd.name, other)))
            self.running.add(sd.name)
        time.sleep(self.seconds)
        with self.lock:
            self.running.discard(sd.name)
        status = "failed" if sd.name in self.fail else "succeeded"
        return StageOutcome(sd.name, status, self.seconds, {"rows_in": 1, "rows_out": 1}, "boom" if status == "failed" else None)


def schedule(tmp_path, width: int, strategy: str = "strict", fail=()):
    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    launch, lines, result = Launcher(fail), [], PipelineRun(defn.name)
    run_scheduled(defn, list(defn.stages), result, strategy, width, launch, False, lines.append)
    return launch, lines, result


def test_independent_stages_run_side_by_side_and_readers_wait_for_every_writer(tmp_path):
    launch, lines, result = schedule(tmp_path, width=2)
    assert frozenset(("split_youtube", "keep_articles")) in launch.overlaps
    assert frozenset(("transcribe", "llm_summary")) in launch.overlaps or \
        frozenset(("transcribe", "keep_articles")) in launch.overlaps
    # score reads what both branches write: it overlaps only feed_day, which depends on no stage of theirs
    assert not any("score" in pair and pair != {"score", "feed_day"} for pair in launch.overlaps)
    assert launch.started.index("score") > max(launch.started.index(s) for s in ("transcribe", "llm_summary"))
    assert [o.name for o in result.outcomes] == ["split_youtube", "keep_articles", "transcribe", "llm_summary", "score",
                                                 "feed_day"]
    ended = [line.split(":")[0].strip() for line in lines if line.startswith("   ")]
    assert sorted(ended) == sorted(o.name for o in result.outcomes)
    assert ended.index("score") > max(ended.index(s) for s in ("transcribe", "llm_summary"))


def test_max_parallel_one_runs_one_stage_at_a_time_in_dag_order(tmp_path):
    launch, _lines, result = schedule(tmp_path, width=1)
    assert launch.overlaps == set()
    assert launch.started == [o.name for o in result.outcomes]


def test_strict_starts_nothing_after_a_failure(tmp_path):
    launch, lines, result = schedule(tmp_path, width=1, fail={"split_youtube"})
    assert launch.started == ["split_youtube"]
    assert {o.name: o.status for o in result.outcomes} == {
        "split_youtube": "failed", "keep_articles": "skipped", "transcribe": "skipped", "llm_summary": "skipped",
        "score": "skipped", "feed_day": "skipped"}
    assert "   keep_articles: skipped (upstream stage failed)" in lines


def test_best_effort_runs_every_branch_not_downstream_of_a_failure(tmp_path):
    launch, _lines, result = schedule(tmp_path, width=2, strategy="best_effort", fail={"split_youtube"})
    status = {o.name: o.status for o in result.outcomes}
    assert status == {"split_youtube": "failed", "keep_articles": "succeeded", "transcribe": "skipped",
                      "llm_summary": "succeeded", "score": "skipped", "feed_day": "succeeded"}
    assert "transcribe" not in launch.started and "score" not in launch.started


def test_ctrl_c_leaves_each_stage_in_flight_one_interrupted_row_under_the_run_id_it_was_given(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    given: dict[str, str] = {}
    both = threading.Barrier(2)

    def launch(sd, run_id, procs):
        given[sd.name] = run_id
        both.wait(timeout=30)
        if sd.name == "split_youtube":
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C reaches the scheduler while both stages run
            time.sleep(0.3)  # the clean-up waits for this stage, which then records itself
            record_failed_run(defn, run_id, INTERRUPTED, sd, details={"phase": "stage"}, status="interrupted")
        else:  # a stage process killed before it wrote anything
            procs.interrupted.wait(timeout=30)
        return StageOutcome(sd.name, "interrupted", error=INTERRUPTED)

    with pytest.raises(KeyboardInterrupt):
        run_scheduled(defn, list(defn.stages), PipelineRun(defn.name), "strict", 2, launch, False, lambda m: None)
    with Source(str(defn.source)) as src:
        for stage in ("split_youtube", "keep_articles"):
            (run,) = src.runs(stage=stage, limit=10)
            assert (run["run_id"], run["status"], run["error"]) == (given[stage], "interrupted", INTERRUPTED)
        assert src.runs(stage="transcribe", limit=10) == []  # never started: no row
    assert len(given) == 2

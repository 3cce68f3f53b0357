"""The warm engine when something dies: the engine under a stage, a run's leader mid-stage, a run
while it starts the engine. Each kill is at a known point: a stage freezes itself
(``MINIKAFKA_FREEZE_AT``, ``MINIKAFKA_FREEZE_MODE=stop``) and the test finds it stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minikafka import Source
from tests.pipelines.helpers import ROOT
from tests.pipelines.test_engine_cli import engine_env, engine_state, ingested, mk
from tests.util.procscan import children_by_parent

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def start(*args, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "minikafka.cli", *map(str, args)], cwd=ROOT, env=env or engine_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stopped_descendant(pid: int, timeout: float = 240) -> int:
    """The pid of the process under ``pid`` that stopped itself at its freeze point."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tree, todo = children_by_parent(), [pid]
        while todo:
            for child in tree.get(todo.pop(), []):
                try:
                    if (Path("/proc") / str(child) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
                        return child
                except OSError:
                    continue
                todo.append(child)
        time.sleep(0.1)
    raise AssertionError("no process of the run reached its freeze point")


def frozen_at(point: str) -> dict[str, str]:
    return {**engine_env(), "MINIKAFKA_FREEZE_AT": point, "MINIKAFKA_FREEZE_MODE": "stop"}


def staged_runs(home: Path) -> list[Path]:
    """The run directories left under the pipeline's staging root (``<stage>/<run id>``)."""
    root = home / ".minikafka-staging"
    return sorted(run for stage in root.iterdir() if stage.is_dir() for run in stage.iterdir()) if root.exists() else []


def test_an_engine_killed_during_a_stage_with_a_suite_fails_that_stage_in_one_line_within_seconds(tmp_path):
    pipeline = ingested(tmp_path, 40)
    serve = start("serve", "--pipeline", pipeline, "--port", "0", "--no-warm-up")
    try:
        ready = serve.stdout.readline()
        assert ready.startswith("engine ready at sc://"), ready + serve.stderr.read()
        url = ready.split()[3]
        state = engine_state()
        run = start("run", pipeline, "--stage", "split_youtube", env=frozen_at("stage:checks"))
        stage = stopped_descendant(run.pid)  # its suite is about to run on the engine
        os.kill(state.jvm_pid, signal.SIGKILL)
        died = time.monotonic()
        os.kill(stage, signal.SIGCONT)
        out, err = run.communicate(timeout=300)
        took = time.monotonic() - died
    finally:
        serve.kill()
        serve.wait()
    assert run.returncode == 1, out + err
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert failed == [f"FAILED split_youtube: EngineStoppedError: the engine at {url} stopped during stage "
                      "split_youtube; nothing was committed and its inputs stay pending"], out
    assert "QualityCheckError" not in out + err and "Rendezvous" not in out + err and "Traceback" not in err
    assert took < 20, f"the run gave up {took:.0f} s after the engine died"
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        (row,) = src.runs(stage="split_youtube")
    assert row["status"] == "failed" and row["error"].startswith("EngineStoppedError: the engine at ")


def test_a_run_killed_mid_stage_on_the_engine_leaves_no_staging_once_the_next_run_ran(tmp_path):
    pipeline = ingested(tmp_path, 30)
    run = start("run", pipeline, "--stage", "keep_articles", env=frozen_at("stage:staged"))
    try:
        stopped_descendant(run.pid)  # its output is staged, nothing is committed
        assert staged_runs(tmp_path), "the stage staged nothing"
        run.kill()  # the leader alone: its stage dies with it
        run.wait()
        again = mk("run", pipeline, "--stage", "split_youtube")  # another stage: the dead run is swept all the same
        assert again.returncode == 0, again.stdout + again.stderr
        assert staged_runs(tmp_path) == []
        with Source(str(tmp_path / "homelab.sqlite")) as src:
            assert all(r["status"] != "succeeded" for r in src.runs(stage="keep_articles"))
    finally:
        mk("serve", "--stop", "--pipeline", pipeline)


def test_a_run_killed_while_it_starts_the_engine_leaves_the_next_run_that_engine_not_a_contradiction(tmp_path):
    pipeline = ingested(tmp_path, 20)
    run = start("run", pipeline, "--stage", "keep_articles", env=frozen_at("engine:ready"))
    try:
        serve = stopped_descendant(run.pid)  # the engine's JVM answers; its `serve` has not said so yet
        run.kill()  # the leader alone: the engine it started lives on
        run.wait()
        again = start("run", pipeline, "--stage", "keep_articles")
        waiting = again.stderr.readline()
        os.kill(serve, signal.SIGCONT)  # the engine comes up while the next run looks for one
        out, err = again.communicate(timeout=300)
        assert again.returncode == 0, waiting + out + err
        assert waiting.startswith("waiting for the engine of homelab that is starting"), waiting + err
        assert "keep_articles          succeeded" in out and "starting an engine" not in err
    finally:
        mk("serve", "--stop", "--pipeline", pipeline)



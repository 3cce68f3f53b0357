"""Kill a real stage process with SIGKILL before, during and after its commit; re-run;
the ledger ends exactly as after one clean run: nothing lost, nothing twice."""

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
from minikafka.util.faults import ENV, MODE_ENV
from tests.spark.crash_child import Doubled, Item, open_topics, stage

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
N = 3000


def seed(path: str) -> None:
    with Source(path) as src:
        open_topics(src)
        src.topic("items", Item, dedup=("url",)).extend([{"url": f"u{i}", "n": i} for i in range(N)])


def snapshot(path: str) -> dict:
    with Source(path) as src:
        open_topics(src)
        doubled = sorted((d.url, d.n2) for d in src.topic("doubled", Doubled, dedup=None).iter_new())
        items = src.topic("items", Item, dedup=("url",))
        runs = [r for r in src.runs(stage="double", limit=50) if r["status"] == "succeeded" and r["rows_out"]]
        return {"doubled": doubled, "items_new": items.count("new"), "items_handled": items.count("handled"),
                "committed_runs": len(runs)}


def kill_at(path: str, point: str) -> None:
    env = {**os.environ, ENV: point, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.spark.crash_child", path], cwd=ROOT, env=env,
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


@pytest.mark.parametrize("point", ["stage:staged", "commit:outputs-inserted", "commit:before-commit",
                                   "commit:after-commit"])
def test_sigkill_then_rerun_gives_the_clean_result(spark, tmp_path, clean_result, point):
    path = str(tmp_path / "ledger.sqlite")
    seed(path)
    kill_at(path, point)
    with Source(path) as src:
        open_topics(src)
        after_kill = src.topic("doubled", Doubled, dedup=None).count()
        run_stage(spark, src, stage())
        run_stage(spark, src, stage())  # and once more: nothing left to do
    assert after_kill == (N if point == "commit:after-commit" else 0)
    assert clean_result["doubled"] == [(f"u{i}", 2 * i) for i in sorted(range(N), key=lambda i: f"u{i}")]
    assert snapshot(path) == clean_result


def start_child(path: str, point: str, remote: str, mode: str = "sleep") -> subprocess.Popen:
    env = {**os.environ, ENV: point, MODE_ENV: mode, "PYTHONPATH": str(ROOT)}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    proc = subprocess.Popen([sys.executable, "-m", "tests.spark.crash_child", path, remote], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if line.startswith(f"FROZEN {point}"):
            return proc
    proc.wait()
    pytest.fail(f"the stage's client ended before reaching {point} (exit {proc.returncode})")


@pytest.mark.parametrize("point", ["stage:staged", "commit:outputs-inserted", "commit:before-commit"])
def test_a_client_of_the_engine_killed_mid_stage_or_mid_commit_leaves_the_ledger_exact(
        spark, engine_url, tmp_path, clean_result, point):
    path = str(tmp_path / "ledger.sqlite")
    seed(path)
    proc = start_child(path, point, engine_url)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with Source(path) as src:
        open_topics(src)
        assert src.topic("doubled", Doubled, dedup=None).count() == 0
        run_stage(spark, src, stage())  # the next run, here on the classic session
    assert snapshot(path) == clean_result


def test_an_engine_killed_mid_stage_fails_the_stage_cleanly_and_the_next_run_recovers(spark, tmp_path,
                                                                                       clean_result):
    from minikafka.spark.engine import EngineProcess, free_port, remote_url, server_command
    from minikafka.spark.session import jdbc_jar, session_conf
    from minikafka.util.procs import child_env

    path = str(tmp_path / "ledger.sqlite")
    seed(path)
    port = free_port()
    engine = EngineProcess(server_command(master="local[1]", host="127.0.0.1", port=port, name="minikafka-crash-engine",
                                          settings=session_conf(jar=jdbc_jar(), testing=True)),
                           tmp_path / "engine.log", env=child_env())
    try:
        engine.wait_ready("127.0.0.1", port)
        proc = start_child(path, "stage:read", remote_url("127.0.0.1", port), mode="stop")
        os.kill(engine.pid, signal.SIGKILL)  # the engine dies while the stage has only planned its read
        engine.proc.wait()
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=300)
    finally:
        engine.stop()
    assert proc.returncode != 0 or out.strip().endswith("failed"), out + err
    with Source(path) as src:
        open_topics(src)
        assert src.topic("doubled", Doubled, dedup=None).count() == 0
        assert src.topic("items", Item, dedup=("url",)).count("new") == N
        runs = src.runs(stage="double", limit=5)
        assert [r["status"] for r in runs] == ["failed"] and runs[0]["error"]
        run_stage(spark, src, stage())  # the next run recovers (here on the classic session)
    assert snapshot(path) == clean_result


def test_a_stage_killed_mid_run_shows_interrupted_and_its_next_run_resumes_after_it(spark, tmp_path, clean_result):
    from click.testing import CliRunner

    from minikafka.cli import main

    path = str(tmp_path / "ledger.sqlite")
    seed(path)
    kill_at(path, "stage:staged")  # Spark has staged the output: the JVM work done, nothing committed
    with Source(path) as src:
        killed = src.runs(stage="double", limit=5)
    assert [r["status"] for r in killed] == ["interrupted"] and "is gone" in killed[0]["error"]
    failed = CliRunner().invoke(main, ["status", "--failed", "--source", path])
    assert killed[0]["run_id"] in failed.output and "interrupted" in failed.output
    with Source(path) as src:
        open_topics(src)
        run = run_stage(spark, src, stage())
        runs = {r["run_id"]: r for r in src.runs(stage="double", limit=5)}
    assert run.status == "succeeded" and run.details["resumes_after"] == [killed[0]["run_id"]]
    old = runs[killed[0]["run_id"]]
    assert old["status"] == "interrupted" and old["details"]["noticed_by"] == run.run_id  # recorded in the ledger
    assert snapshot(path) == clean_result

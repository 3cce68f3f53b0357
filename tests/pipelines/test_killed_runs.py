"""A stage process killed with SIGKILL (the OOM killer, kill -9) shows as interrupted: in
``status`` and ``status --failed``, in ``health`` (exit non-zero), on the console's runs pages,
in ``minikafka metrics``; the stage's next run says it resumes after it. A run in progress in
another process stays 'running'; a pid reused by another process is not taken for the run's.

No JVM: the stage's process is the runner's own stage path (``run_in_process``) with no engine,
frozen at ``stage:started`` (util.faults) after its 'running' row, then killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from minikafka import Source
from minikafka.cli import main
from minikafka.ledger.consuming import RunResult, read_runs, write_run_in_current_transaction
from minikafka.ledger.transactions import Ledger
from minikafka.util import liveness
from minikafka.util.clock import ManualClock, format_timestamp, now, parse_timestamp, use_clock
from minikafka.util.faults import ENV, MODE_ENV
from tests.console.conftest import Console
from tests.pipelines.killed_child import Item

parser = pytest.importorskip("prometheus_client.parser")

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = """[pipeline]
name = "night"
source = "data/night.sqlite"

[topics.items]
model = "tests.pipelines.killed_child:Item"
dedup = ["url"]

[topics.copies]
model = "tests.pipelines.killed_child:Item"
dedup = []

[[stages]]
name = "copy"
job = "tests.pipelines.killed_child"
inputs = ["items"]
outputs = ["copies"]
freshness = "1h"
"""


@pytest.fixture
def night(tmp_path) -> Path:
    """A pipeline file and its ledger; ``items`` holds rows appended 3 hours ago, never copied."""
    (tmp_path / "data").mkdir()
    pipeline = tmp_path / "night.toml"
    pipeline.write_text(PIPELINE)
    return pipeline


def ledger_of(pipeline: Path) -> Path:
    return pipeline.parent / "data" / "night.sqlite"


def seed(pipeline: Path, rows: int = 5, age: timedelta = timedelta(hours=3)) -> None:
    with use_clock(ManualClock(now() - age)), Source(str(ledger_of(pipeline))) as src:
        src.topic("items", Item, dedup=("url",)).extend([{"url": f"u{i}", "n": i} for i in range(rows)])
        src.topic("copies", Item, dedup=None)
        src.topic("items", Item, dedup=("url",)).consumer("copy")  # the stage's consumer, as after its first run


def start_frozen(pipeline: Path, mode: str = "sleep") -> subprocess.Popen:
    """The stage's process, stopped at ``stage:started`` (its 'running' row written)."""
    env = {**os.environ, ENV: "stage:started", MODE_ENV: mode, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.pipelines.killed_child", str(pipeline)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("FROZEN stage:started"):
            proc.seen = seen
            return proc
    proc.wait()
    pytest.fail(f"the stage process ended before its start (exit {proc.returncode}): {''.join(seen)}")


def kill_mid_run(pipeline: Path) -> str:
    """SIGKILL the stage's process mid-run; its run id."""
    proc = start_frozen(pipeline)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    runs = stored_runs(pipeline)
    assert runs[0]["status"] == "running"  # what the ledger holds: nothing wrote after the kill
    return runs[0]["run_id"]


def stored_runs(pipeline: Path) -> list[dict]:
    """The run log's rows as stored (no liveness applied), most recent first."""
    led = Ledger(str(ledger_of(pipeline)))
    try:
        cols = [r[1] for r in led.conn.execute("PRAGMA table_info(_minikafka_runs)")]
        rows = [dict(zip(cols, r)) for r in led.conn.execute(
            "SELECT * FROM _minikafka_runs ORDER BY started_at DESC, rowid DESC")]
    finally:
        led.close()
    for row in rows:
        row["details"] = json.loads(row["details"]) if row["details"] else None
    return rows


def good_run_before(pipeline: Path) -> RunResult:
    """A succeeded run of the stage 10 minutes ago ("last run: succeeded 10m ago")."""
    run = RunResult("copy-earlier", "stage", stage="copy", started_at=format_timestamp(now() - timedelta(minutes=10)))
    run.finish("succeeded")
    led = Ledger(str(ledger_of(pipeline)))
    with led.atomic() as conn:
        write_run_in_current_transaction(conn, run)
    led.close()
    return run


def families(text: str) -> dict:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def sample(fams: dict, name: str, **labels) -> float:
    family = fams[name.removesuffix("_total")]
    found = [s.value for s in family.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, family.samples)
    return found[0]


def test_a_stage_killed_by_sigkill_shows_as_interrupted_in_status_health_console_and_metrics(night, monkeypatch):
    # the console process (started in the project's directory) imports the pipeline's model from this checkout
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    seed(night)
    before = good_run_before(night)
    run_id = kill_mid_run(night)
    ledger = str(ledger_of(night))
    cli = CliRunner()

    failed = cli.invoke(main, ["status", "--failed", "--source", ledger])
    assert failed.exit_code == 0, failed.output
    assert run_id in failed.output and "interrupted" in failed.output and "is gone" in failed.output
    listed = json.loads(cli.invoke(main, ["status", "--json", "--source", ledger]).output)
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "interrupted"), (before.run_id, "succeeded")]

    health = cli.invoke(main, ["health", "--pipeline", str(night)])
    assert health.exit_code != 0, health.output
    assert "stage copy last run" in health.output and f"interrupted ({run_id}," in health.output
    assert "ago" in health.output.split(run_id, 1)[1].splitlines()[0]

    printed = cli.invoke(main, ["metrics", "--pipeline", str(night)])
    assert printed.exit_code == 0, printed.output
    textfile = night.parent / "textfile"
    textfile.mkdir()
    written = subprocess.run([sys.executable, "-m", "minikafka.cli", "metrics", "--pipeline", str(night),
                              "--textfile", str(textfile)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert written.returncode == 0, written.stderr

    console = Console(ledger_of(night), "--pipeline", str(night))
    try:
        with urllib.request.urlopen(f"{console.url}/metrics", timeout=10) as response:
            scraped = response.read().decode()
        with urllib.request.urlopen(f"{console.url}/runs?status=interrupted", timeout=10) as response:
            page = response.read().decode()
        with urllib.request.urlopen(f"{console.url}/runs/{run_id}", timeout=10) as response:
            detail = response.read().decode()
    finally:
        console.stop()
    started = next(r["started_at"] for r in stored_runs(night) if r["run_id"] == run_id)
    for where, text in (("command", printed.output), ("textfile", (textfile / "minikafka.prom").read_text()),
                        ("console /metrics", scraped)):
        fams = families(text)
        stage = {"pipeline": "night", "stage": "copy"}
        assert sample(fams, "minikafka_stage_last_run_status", **stage, status="interrupted") == 1, where
        assert sample(fams, "minikafka_stage_last_run_status", **stage, status="running") == 0, where
        assert sample(fams, "minikafka_stage_last_interrupted_timestamp_seconds", **stage) == \
            parse_timestamp(started).timestamp(), where
        assert sample(fams, "minikafka_stage_last_failure_timestamp_seconds", **stage) == \
            parse_timestamp(started).timestamp(), where
        assert sample(fams, "minikafka_stage_last_success_timestamp_seconds", **stage) == \
            parse_timestamp(before.finished_at).timestamp(), where  # the old success kept
        assert sample(fams, "minikafka_stage_runs_total", **stage, status="interrupted") == 1, where
        assert sample(fams, "minikafka_stage_runs_total", **stage, status="succeeded") == 1, where
        assert sample(fams, "minikafka_stage_last_run_in_rows", **stage) == 0, where  # nothing committed
    assert run_id in page
    assert "interrupted" in detail and "is gone" in detail


def test_pending_rows_older_than_the_stages_freshness_fail_health_without_a_max_lag(night):
    seed(night, age=timedelta(hours=3))
    good_run_before(night)  # a success within the freshness: only the waiting rows say something is wrong
    result = CliRunner().invoke(main, ["health", "--pipeline", str(night)])
    assert result.exit_code != 0, result.output
    assert "stage copy pending" in result.output and "oldest pending row of items appended 3.0h ago (limit 1h)" in result.output


def test_rows_pending_for_less_than_the_freshness_keep_health_passing(night):
    seed(night, age=timedelta(minutes=5))
    good_run_before(night)
    result = CliRunner().invoke(main, ["health", "--pipeline", str(night)])
    assert result.exit_code == 0, result.output


def test_the_next_run_records_that_it_resumes_after_the_killed_run(night):
    seed(night, rows=0)  # nothing pending: the runner runs the stage with no JVM
    killed = kill_mid_run(night)
    result = CliRunner().invoke(main, ["run", "--pipeline", str(night), "--in-process"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "resumed after" in line]
    assert lines == [f"   copy: resumed after interrupted run {killed}; nothing of it was committed"]
    new, old = stored_runs(night)[:2]
    assert old["run_id"] == killed and old["status"] == "interrupted"  # recorded in the ledger now
    assert old["details"]["noticed_by"] == new["run_id"] and "is gone" in old["error"]
    assert new["status"] == "succeeded" and new["details"]["resumes_after"] == [killed]
    assert "process" not in new["details"]  # a finished row names no process


def test_a_run_in_progress_in_another_process_is_running_not_interrupted(night):
    seed(night)
    proc = start_frozen(night)  # alive, stopped at its start
    try:
        runs = [r for r in read_runs_of(night) if r["kind"] == "stage"]
        assert runs[0]["status"] == "running"
        failed = CliRunner().invoke(main, ["status", "--failed", "--source", str(ledger_of(night))])
        assert runs[0]["run_id"] not in failed.output
        fams = families(CliRunner().invoke(main, ["metrics", "--pipeline", str(night)]).output)
        assert sample(fams, "minikafka_stage_last_run_status", pipeline="night", stage="copy", status="running") == 1
        health = CliRunner().invoke(main, ["health", "--pipeline", str(night)])
        assert "stage copy last run: running" in health.output.replace("ok    ", "").replace("ok  ", "") or \
            f"running ({runs[0]['run_id']}" in health.output
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert {r["run_id"]: r["status"] for r in read_runs_of(night)}[runs[0]["run_id"]] == "interrupted"


def read_runs_of(pipeline: Path) -> list[dict]:
    with Source(str(ledger_of(pipeline))) as src:
        return read_runs(src.ledger.conn, limit=5)


def _running_row(pipeline: Path, process: dict, run_id: str = "copy-other") -> None:
    led = Ledger(str(ledger_of(pipeline)))
    with led.atomic() as conn:
        conn.execute("INSERT INTO _minikafka_runs (run_id, kind, stage, status, started_at, details) "
                     "VALUES (?, 'stage', 'copy', 'running', ?, ?)",
                     (run_id, "2030-01-01T00:00:00.000000Z", json.dumps({"process": process})))
    led.close()


def test_a_running_row_whose_pid_was_reused_by_another_process_is_interrupted(night):
    seed(night, rows=0)
    mine = liveness.this_process()  # this pid is alive, but its process started at another time than the row says
    _running_row(night, {**mine, "start": "1@" + mine["start"].split("@")[1]})
    assert read_runs_of(night)[0]["status"] == "interrupted"
    _running_row(night, mine, "copy-alive")
    assert {r["run_id"]: r["status"] for r in read_runs_of(night)}["copy-alive"] == "running"


def test_a_running_row_of_another_host_is_unknown_unless_its_lock_tells(night, tmp_path):
    import fcntl

    seed(night, rows=0)
    lock = tmp_path / "copy.lock"
    lock.write_text("pid 1 run copy-elsewhere")
    _running_row(night, {"pid": 1, "host": "elsewhere", "start": None}, "copy-unknown")
    assert read_runs_of(night)[0]["status"] == "unknown"
    _running_row(night, {"pid": 1, "host": "elsewhere", "start": None, "lock": str(lock)}, "copy-elsewhere")
    assert read_runs_of(night)[0]["status"] == "interrupted"  # nobody holds its lock
    with open(lock) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert read_runs_of(night)[0]["status"] == "running"  # its lock is held, by that run
    health = CliRunner().invoke(main, ["health", "--pipeline", str(night)])
    assert "interrupted (copy-elsewhere" in health.output


def test_a_dry_run_writes_no_running_row(night):
    seed(night, rows=0)
    result = CliRunner().invoke(main, ["run", "--pipeline", str(night), "--in-process", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert stored_runs(night) == []


def test_pruning_the_run_log_removes_an_old_killed_run_a_running_row_would_have_kept_forever(night):
    from minikafka.ledger.consuming.runlog_retention import prune_runs_in_current_transaction

    seed(night, rows=0)
    killed = kill_mid_run(night)
    later = RunResult("copy-later", "stage", stage="copy", started_at=format_timestamp(now() + timedelta(seconds=5)))
    later.finish("succeeded")
    led = Ledger(str(ledger_of(night)))
    with led.atomic() as conn:
        write_run_in_current_transaction(conn, later)
        deleted, _kept = prune_runs_in_current_transaction(conn, format_timestamp(now() + timedelta(seconds=1)))
    led.close()
    assert deleted == 1 and [r["run_id"] for r in stored_runs(night)] == ["copy-later"]
    assert killed not in [r["run_id"] for r in stored_runs(night)]


def test_a_minikafka_run_killed_by_sigkill_mid_stage_shows_interrupted_and_the_next_run_says_it_resumes(night):
    seed(night, rows=0)  # nothing new: 'minikafka run' runs the stage in its own process, no JVM
    env = {**os.environ, ENV: "stage:started", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "run", "--pipeline", str(night)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if line.startswith("FROZEN stage:started"):
            break
    else:
        proc.wait()
        pytest.fail(f"minikafka run ended before the stage started (exit {proc.returncode})")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = stored_runs(night)[0]["run_id"]
    failed = CliRunner().invoke(main, ["status", "--failed", "--pipeline", str(night)])
    assert killed in failed.output and "interrupted" in failed.output
    assert CliRunner().invoke(main, ["health", "--pipeline", str(night)]).exit_code != 0
    again = subprocess.run([sys.executable, "-m", "minikafka.cli", "run", "--pipeline", str(night)], cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"copy: resumed after interrupted run {killed}; nothing of it was committed" in again.stdout + again.stderr
    assert CliRunner().invoke(main, ["health", "--pipeline", str(night)]).exit_code == 0


def test_a_stage_process_the_runner_launched_killed_by_sigkill_is_recorded_interrupted_by_the_runner(night):
    import threading
    import time

    from minikafka.pipelines.definition import load_pipeline
    from minikafka.pipelines.launch.child import Children, run_child

    seed(night)
    defn = load_pipeline(night, check_jobs=False, suites=False)
    sd = defn.stage("copy")
    run_id = "copy-launched"
    procs = Children()
    env = {**os.environ, ENV: "stage:started", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests.pipelines.killed_child", str(night), "copy", run_id]
    outcomes = []
    runner = threading.Thread(target=lambda: outcomes.append(
        run_child(defn, sd, cmd, run_id, False, lambda *_: None, procs, False, None, env=env)))
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        runner.start()
        deadline = time.monotonic() + 60
        while not any(r["run_id"] == run_id for r in stored_runs(night)) or "copy" not in procs.running:
            assert time.monotonic() < deadline, "the stage never wrote its running row"
            time.sleep(0.05)
        os.kill(procs.running["copy"].pid, signal.SIGKILL)  # the OOM killer picks the stage's process
        runner.join(60)
    finally:
        os.chdir(cwd)
    outcome = outcomes[0]
    assert outcome.status == "failed" and "killed by SIGKILL" in outcome.error
    row = next(r for r in stored_runs(night) if r["run_id"] == run_id)
    assert row["status"] == "interrupted" and "killed by SIGKILL" in row["error"] and row["finished_at"]


def test_a_backfill_killed_by_sigkill_shows_interrupted_and_the_next_one_resumes_after_it(tmp_path):
    ledger = tmp_path / "loads.sqlite"
    dump = tmp_path / "empty.jsonl"
    dump.write_text("")  # nothing to load: the backfill needs no engine
    args = [sys.executable, "-m", "tests.pipelines.killed_child", "backfill", str(ledger), str(dump)]
    frozen = subprocess.Popen(args, cwd=ROOT, env={**os.environ, ENV: "backfill:started", "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in frozen.stderr:
        if line.startswith("FROZEN backfill:started"):
            break
    else:
        frozen.wait()
        pytest.fail(f"the backfill ended before its start (exit {frozen.returncode})")
    os.kill(frozen.pid, signal.SIGKILL)
    frozen.wait()
    with Source(str(ledger)) as src:
        killed = src.runs(stage="backfill:items")
    assert [r["status"] for r in killed] == ["interrupted"] and "is gone" in killed[0]["error"]
    failed = CliRunner().invoke(main, ["status", "--failed", "--source", str(ledger)])
    assert killed[0]["run_id"] in failed.output
    again = subprocess.run(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"resuming after interrupted run {killed[0]['run_id']}" in again.stdout
    with Source(str(ledger)) as src:
        new, old = src.runs(stage="backfill:items")
    assert new["status"] == "succeeded" and new["details"]["resumes_after"] == [killed[0]["run_id"]]
    assert old["status"] == "interrupted" and old["details"]["noticed_by"] == new["run_id"]


def test_a_running_row_of_another_pid_namespace_on_the_same_host_name_is_not_judged_by_its_pid(night):
    seed(night, rows=0)
    mine = liveness.this_process()
    # a container sharing the host's name: pid 999999 means nothing here, and no lock tells
    _running_row(night, {**mine, "pid": 999999, "pidns": "pid:[1]"}, "copy-container")
    assert read_runs_of(night)[0]["status"] == "unknown"

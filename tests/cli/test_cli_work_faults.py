"""``minikafka work`` under faults: leases kept while a job runs, honest counts, signals from the
first instant, bounded concurrency, workers that die with their parent, ``async def`` handlers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from minikafka import JobFailedError, Source
from tests.util.procscan import marked_pids

ROOT = Path(__file__).resolve().parents[2]

HANDLERS = textwrap.dedent("""
    import asyncio, os, time
    from pydantic import BaseModel

    class Feed(BaseModel):
        url: str
        sleep: float = 0.0

    def log(line):
        with open(os.environ["WORK_LOG"], "a") as fh:
            fh.write(line + "\\n")

    def slow(item):
        log(f"start {item.url}")
        time.sleep(item.sleep)
        log(f"done {item.url}")

    async def handle_async(item):
        await asyncio.sleep(0.01)
        log(f"done {item.url}")

    def odd_result(item):
        import datetime, math
        log(f"ran {item.url}")
        return {"when": datetime.datetime(2026, 1, 1), "tags": {"a"}, "raw": b"x", "score": math.nan}[item.url] \
            if item.url in ("when", "tags", "raw", "score") else {"ok": item.url}

    def crash_once(item):
        flag = os.environ["WORK_LOG"] + ".crashed"
        if item.url == "crash" and not os.path.exists(flag):
            open(flag, "w").close()
            os._exit(3)  # the worker process dies mid-job, as a segfault in a C extension would
        log(f"done {item.url}")
""")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "faultjobs.py").write_text(HANDLERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("WORK_LOG", str(tmp_path / "work.log"))
    sys.modules.pop("faultjobs", None)
    import faultjobs

    return tmp_path, faultjobs


def _cli(workdir: Path, *args: str, marker: str = "") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{workdir}", "WORK_TEST_MARKER": marker}
    return subprocess.Popen([sys.executable, "-m", "minikafka.cli", "work", *args], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _marked(marker: str) -> list[int]:
    """Pids of live processes started with WORK_TEST_MARKER=marker (the CLI and its forked workers)."""
    return marked_pids("WORK_TEST_MARKER", marker)


def _wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _lines(path: Path) -> list[str]:
    log = path / "work.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_job_longer_than_its_visibility_timeout_runs_once_and_is_acked(workdir):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        source.queue("feed", mod.Feed, visibility_timeout=1, max_attempts=3).enqueue({"url": "u1", "sleep": 2.5})
    proc = _cli(path, "faultjobs:slow", "--queue", "feed", "--once", "--source", db)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "1 claimed, 1 acked, 0 retried, 0 dead-lettered, 0 lost their lease" in out
    assert _lines(path) == ["start u1", "done u1"]
    with Source(db) as source:
        assert source.queue("feed", mod.Feed).stats() == {"pending": 0, "processing": 0, "dead": 0, "done": 1, "cancelled": 0}


def test_a_job_dead_lettered_at_a_claim_is_counted_as_dead_lettered(workdir):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        # a worker long gone claimed it: its lease ran out, and its only attempt is used up
        ghost = source.queue("feed", mod.Feed, visibility_timeout=1, max_attempts=1, clock=lambda: time.time() - 60)
        ghost.enqueue({"url": "u1"})
        assert ghost.claim_one("ghost") is not None
    proc = _cli(path, "faultjobs:slow", "--queue", "feed", "--once", "--source", db)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "0 claimed, 0 acked, 0 retried, 1 dead-lettered" in out


def test_an_async_handler_is_awaited_for_every_job(workdir):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        q = source.queue("feed", mod.Feed)
        for i in range(5):
            q.enqueue({"url": f"u{i}"})
    proc = _cli(path, "faultjobs:handle_async", "--queue", "feed", "--once", "-c", "2", "--source", db)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "5 claimed, 5 acked" in out
    assert sorted(_lines(path)) == [f"done u{i}" for i in range(5)]


def test_a_concurrency_beyond_the_limit_is_refused_naming_the_option(workdir):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        source.queue("feed", mod.Feed)
    proc = _cli(path, "faultjobs:slow", "--queue", "feed", "-c", "100000", "--source", db)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "--concurrency" in err and "100000" in err and "<=" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("delay", [0.2, 0.6, 1.0, 1.5])
def test_sigterm_while_sixteen_workers_start_ends_the_run_and_leaves_no_worker(workdir, delay):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        source.queue("feed", mod.Feed)
    marker = uuid.uuid4().hex
    proc = _cli(path, "faultjobs:slow", "--queue", "feed", "-c", "16", "--source", db, marker=marker)
    time.sleep(delay)  # the instant of the signal is what this test varies
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the parent did not end within 20 s of SIGTERM")
    assert _wait_until(lambda: not _marked(marker), 10), f"workers left running: {_marked(marker)}"


def test_kill_9_of_the_parent_stops_its_workers(workdir):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        source.queue("feed", mod.Feed)
    marker = uuid.uuid4().hex
    proc = _cli(path, "faultjobs:slow", "--queue", "feed", "-c", "2", "--source", db, marker=marker)
    try:
        assert _wait_until(lambda: len(_marked(marker)) >= 3, 30), "the workers did not start"
        with Source(db) as source:  # alive: its run is running
            assert [r["status"] for r in source.runs(stage="feed")] == ["running"]
        proc.kill()
        proc.wait(10)
        assert _wait_until(lambda: not _marked(marker), 10), f"workers left running: {_marked(marker)}"
    finally:
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)
    with Source(db) as source:  # the killed run shows as interrupted, its process named
        runs = source.runs(stage="feed")
    assert [r["status"] for r in runs] == ["interrupted"] and f"pid {proc.pid} " in runs[0]["error"]


@pytest.mark.parametrize("kind", ["when", "tags", "raw", "score"])
def test_a_result_json_cannot_hold_finishes_the_job_once_with_the_refusal_as_its_error(workdir, kind):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        q = source.queue("feed", mod.Feed, visibility_timeout=1, max_attempts=3)
        odd = q.enqueue({"url": kind}, priority=1)  # claimed first: the worker must go on after it
        good = [q.enqueue({"url": f"u{i}"}) for i in range(3)]
    proc = _cli(path, "faultjobs:odd_result", "--queue", "feed", "--once", "--source", db)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "4 claimed, 3 acked, 0 retried, 1 dead-lettered" in out
    assert _lines(path).count(f"ran {kind}") == 1  # the handler ran once: never again after a lease
    with Source(db) as source:
        q = source.queue("feed", mod.Feed)
        info = q.get(odd)
        assert info.state == "dead" and info.attempts == 1
        assert "cannot be written as JSON" in info.last_error and "result" in info.last_error
        with pytest.raises(JobFailedError, match="cannot be written as JSON"):
            q.result(odd, timeout=0)
        assert [q.result(j, timeout=0) for j in good] == [{"ok": f"u{i}"} for i in range(3)]


def test_a_crashed_worker_is_replaced_and_the_other_jobs_still_run(workdir):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        q = source.queue("feed", mod.Feed, visibility_timeout=60)
        q.enqueue({"url": "crash"}, priority=1)
        for i in range(3):
            q.enqueue({"url": f"u{i}"})
    proc = _cli(path, "faultjobs:crash_once", "--queue", "feed", "--once", "-c", "1", "--source", db)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)  # a crash is reported, but the run went on
    assert "Traceback" not in err
    assert "3 acked" in out and "1 worker(s) crashed" in out
    assert "replaced" in err
    assert sorted(_lines(path)) == ["done u0", "done u1", "done u2"]


def test_a_job_with_its_own_single_attempt_is_counted_dead_not_retried(workdir):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        source.queue("feed", mod.Feed, max_attempts=3).enqueue({"url": "u1"}, max_attempts=1)
    (path / "failing.py").write_text("def fail(item):\n    raise RuntimeError('no')\n")
    proc = _cli(path, "failing:fail", "--queue", "feed", "--once", "--retry-delay", "0", "--source", db)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "1 claimed, 0 acked, 0 retried, 1 dead-lettered" in out

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

from minikafka import Source

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
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"WORK_TEST_MARKER={marker}".encode() in environ.split(b"\0") and state != "Z":
            pids.append(int(entry))
    return pids


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
        proc.kill()
        proc.wait(10)
        assert _wait_until(lambda: not _marked(marker), 10), f"workers left running: {_marked(marker)}"
    finally:
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)

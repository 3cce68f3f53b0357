"""``minikafka work``: worker processes, retries with backoff, the dead letter, SIGTERM, bad input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from minikafka import LedgerError, Source
from minikafka.api.modes.workers import backoff_delay

ROOT = Path(__file__).resolve().parents[2]

HANDLERS = textwrap.dedent("""
    import os, time
    from pydantic import BaseModel

    class Feed(BaseModel):
        url: str
        fail: bool = False
        sleep: float = 0.0

    def handle(item):
        with open(os.environ["WORK_LOG"], "a") as fh:
            fh.write(f"start {item.url}\\n")
        time.sleep(item.sleep)
        if item.fail:
            raise ValueError("cannot fetch " + item.url)
        with open(os.environ["WORK_LOG"], "a") as fh:
            fh.write(f"done {item.url}\\n")
""")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "feedjobs.py").write_text(HANDLERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("WORK_LOG", str(tmp_path / "work.log"))
    sys.modules.pop("feedjobs", None)
    import feedjobs

    return tmp_path, feedjobs


def _cli(workdir: Path, *args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{workdir}"}
    return subprocess.Popen([sys.executable, "-m", "minikafka.cli", "work", *args], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def test_work_once_acks_returns_and_retries_exceptions_into_the_dead_letter(workdir):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        q = source.queue("feed", mod.Feed, max_attempts=2)
        for i in range(8):
            q.enqueue({"url": f"u{i}"})
        q.enqueue({"url": "bad", "fail": True})
    proc = _cli(path, "feedjobs:handle", "--queue", "feed", "--concurrency", "3", "--once",
                "--retry-delay", "0", "--source", db)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "10 claimed, 8 acked, 1 retried, 1 dead-lettered" in out
    with Source(db) as source:
        q = source.queue("feed", mod.Feed, max_attempts=2)
        assert q.stats() == {"pending": 0, "processing": 0, "dead": 1, "done": 8, "cancelled": 0}
        assert q.dead()[0]["last_error"] == "ValueError: cannot fetch bad"
        run = source.runs(limit=1)[0]
    assert (run["kind"], run["status"], run["rows_out"], run["rows_quarantined"]) == ("work", "succeeded", 8, 1)
    done = [line for line in (path / "work.log").read_text().splitlines() if line.startswith("done")]
    assert sorted(done) == sorted(f"done u{i}" for i in range(8))


def test_retry_backoff_doubles_with_each_attempt(workdir):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        source.queue("feed", mod.Feed, max_attempts=3).enqueue({"url": "bad", "fail": True})
    proc = _cli(path, "feedjobs:handle", "--queue", "feed", "--once", "--retry-delay", "100", "--source", db)
    proc.communicate(timeout=60)
    with Source(db) as source:
        q = source.queue("feed", mod.Feed, max_attempts=3)
        assert 99 < q.next_due_in() <= 100  # attempt 1 failed: 100 * 2**0
        assert q.dead()[0:0] == [] and q.stats()["pending"] == 1
    assert [backoff_delay(100, n) for n in (1, 2, 3)] == [100, 200, 400]


def test_sigterm_lets_the_jobs_in_flight_finish(workdir):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        q = source.queue("feed", mod.Feed)
        for i in range(6):
            q.enqueue({"url": f"slow{i}", "sleep": 0.6})
    proc = _cli(path, "feedjobs:handle", "--queue", "feed", "--concurrency", "2", "--source", db)
    log = path / "work.log"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not log.exists() or log.read_text().count("start") < 2):
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = log.read_text().splitlines()
    started = {line.split()[1] for line in lines if line.startswith("start")}
    finished = {line.split()[1] for line in lines if line.startswith("done")}
    assert started == finished and len(started) >= 2
    with Source(db) as source:
        stats = source.queue("feed", mod.Feed).stats()
    assert stats["processing"] == 0 and stats["done"] == len(finished)
    assert stats["pending"] == 6 - len(finished)
    assert "acked" in out


@pytest.mark.parametrize("handler, queue, message", [
    ("nosuchmodule:handle", "feed", "cannot import handler module 'nosuchmodule'"),
    ("feedjobs:missing", "feed", "has no attribute 'missing'"),
    ("feedjobs", "feed", "MODULE:FUNCTION"),
    ("feedjobs:handle", "nope", "no queue named 'nope'"),
])
def test_bad_handler_or_queue_is_a_clear_error(workdir, handler, queue, message):
    path, mod = workdir
    db = str(path / "ledger.sqlite")
    with Source(db) as source:
        source.queue("feed", mod.Feed)
    proc = _cli(path, handler, "--queue", queue, "--once", "--source", db)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert message in err and "Traceback" not in err


def test_a_missing_ledger_is_a_clear_error_and_no_file_is_created(workdir):
    path, _ = workdir
    proc = _cli(path, "feedjobs:handle", "--queue", "feed", "--once", "--source", str(path / "none.sqlite"))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "no ledger at" in err and "Traceback" not in err
    assert not (path / "none.sqlite").exists()


def test_a_ledger_on_a_read_only_path_is_a_clear_error():
    with pytest.raises(LedgerError, match="cannot open ledger"):
        Source("/proc/ledger.sqlite")  # a read-only file system, even for root


def test_work_help_states_the_concurrency_limit_without_contradicting_itself():
    from click.testing import CliRunner

    from minikafka.cli import main
    from minikafka.util.procs import concurrency_limit

    text = " ".join(CliRunner().invoke(main, ["work", "--help"]).output.split())
    limit = concurrency_limit()
    assert f"at most {limit} on this machine (the limit is 4 per CPU, but never below 32 nor above 256)" in text
    assert f"at most {limit}: 4 per CPU, at least 32" not in text

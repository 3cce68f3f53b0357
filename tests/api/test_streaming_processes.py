"""Streaming consumers across processes: parallel workers, and SIGKILL in the middle of a window."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minikafka import Source
from tests.api.stream_child import WindowSum

ROOT = Path(__file__).resolve().parents[2]


def slow(window):
    time.sleep(1)
    return {"window": window.id, "pid": os.getpid(), "finished": time.monotonic()}


def run_slow(db_path: str, workers: int) -> tuple[float, list[dict]]:
    with Source(db_path) as source:
        stream = source.stream("events")
        stream.extend([{"i": i} for i in range(5)])
        out = source.stream("out")
        t0 = time.perf_counter()
        source.streaming("events", slow, size=1, workers=workers, sink=out, until_idle=True)
        seconds = time.perf_counter() - t0
        return seconds, list(out.iter_new())


def test_five_workers_run_five_one_second_windows_at_once(db_path):
    seconds, outputs = run_slow(db_path, workers=5)
    assert seconds < 2.5, seconds
    assert [o["window"] for o in outputs] == [1, 2, 3, 4, 5]  # committed in window order
    assert len({o["pid"] for o in outputs}) > 1 and os.getpid() not in {o["pid"] for o in outputs}


def test_one_worker_runs_five_one_second_windows_one_after_another(db_path):
    seconds, outputs = run_slow(db_path, workers=1)
    assert seconds >= 5.0
    assert [o["window"] for o in outputs] == [1, 2, 3, 4, 5]


def boom(window):
    if window.id == 2:
        raise RuntimeError("window 2 breaks")
    return {"window": window.id}


def test_with_workers_a_failed_window_holds_back_the_later_commits(db_path):
    with Source(db_path) as source:
        source.stream("events").extend([{"i": i} for i in range(3)])
        out = source.stream("out")
        with pytest.raises(Exception, match="window 2 of consumer 'boom' failed 1 time"):
            source.streaming("events", boom, size=1, workers=3, sink=out, until_idle=True, max_attempts=1)
        assert [o["window"] for o in out.iter_new()] == [1]
        states = [(w.window_id, w.state) for w in reversed(source.stream("events").windows("boom"))]
        assert states == [(1, "committed"), (2, "open"), (3, "open")]


def start_child(db_path: str, log: Path, **env) -> subprocess.Popen:
    full_env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **env}
    return subprocess.Popen([sys.executable, "-m", "tests.api.stream_child", db_path, str(log)], cwd=ROOT,
                            env=full_env, stderr=subprocess.PIPE, text=True)


def wait_frozen(proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "FROZEN" in line:
            return
        if not line and proc.poll() is not None:
            raise AssertionError(f"child exited with {proc.returncode} before freezing")
    raise AssertionError("child never froze")


@pytest.mark.parametrize("freeze", [{"FREEZE_WINDOW": "3"}, {"MINIKAFKA_FREEZE_AT": "stream:inside-commit"}],
                         ids=["in-function", "inside-commit"])
def test_kill_during_a_window_then_restart_loses_no_row_and_repeats_no_committed_window(db_path, tmp_path, freeze):
    log = tmp_path / "offered.log"
    with Source(db_path) as source:
        source.stream("events").extend([{"i": i} for i in range(10)])
        source.topic("sums", WindowSum, dedup=None)
    child = start_child(db_path, log, **freeze)
    wait_frozen(child)
    child.send_signal(signal.SIGKILL)
    child.wait()
    before = log.read_text().splitlines()
    again = start_child(db_path, log)
    assert again.wait(60) == 0, again.stderr.read()
    offered = log.read_text().splitlines()
    after = offered[len(before):]
    killed = before[-1]
    assert after[0] == killed  # the window in flight comes back: same id, same rows
    assert not set(before[:-1]) & set(after)  # a committed window is never offered again
    with Source(db_path) as source:
        sums = list(source.topic("sums", WindowSum, dedup=None).iter_new())
        assert [s.window for s in sums] == [1, 2, 3, 4, 5]
        assert sum(s.total for s in sums) == sum(range(10))
        assert source.stream("events").count("new", consumer="summed") == 0


def slower_first(window):
    time.sleep(0.6 if window.id == 1 else 0.0)
    return {"window": window.id, "finished": time.monotonic()}


def test_with_workers_windows_commit_in_id_order_even_when_a_later_one_finishes_first(db_path):
    with Source(db_path) as source:
        source.stream("events").extend([{"i": i} for i in range(3)])
        out = source.stream("out")
        source.streaming("events", slower_first, size=1, workers=3, sink=out, until_idle=True)
        rows = list(out.iter_new())
        assert [o["window"] for o in rows] == [1, 2, 3]
        assert rows[1]["finished"] < rows[0]["finished"]  # window 2 finished first, committed second
        committed = [w.committed_at for w in reversed(source.stream("events").windows("slower_first"))]
        assert committed == sorted(committed)


def _children() -> list[int]:
    """Pids of this process's live children (the streaming pool's workers among them)."""
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        pids += [int(p) for p in (task / "children").read_text().split()]
    return pids


def test_a_huge_number_of_streaming_workers_is_refused_before_anything_starts(db_path):
    from minikafka import StreamingConfigError
    from minikafka.util.procs import concurrency_limit

    before = _children()
    with Source(db_path) as source:
        source.stream("events")  # empty
        with pytest.raises(StreamingConfigError, match=rf"workers must be an integer from 1 to {concurrency_limit()}"
                                                       r".*got 1000000"):
            source.streaming("events", slow, size=1, workers=10**6, until_idle=True)
        assert source.runs(limit=5) == []  # nothing registered, nothing run
        assert source.stream("events").consumers() == []
    assert _children() == before


def pool_size(window):
    return {"window": window.id, "siblings": _siblings()}


def _siblings() -> list[int]:
    return _children_of(os.getppid())


def _children_of(pid: int) -> list[int]:
    pids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        pids += [int(p) for p in (task / "children").read_text().split()]
    return pids


def test_streaming_workers_start_as_windows_need_them_not_all_at_once(db_path):
    with Source(db_path) as source:
        source.stream("events").extend([{"i": i} for i in range(2)])
        out = source.stream("out")
        before = set(_children_of(os.getpid()))  # what earlier tests left running in this process
        source.streaming("events", pool_size, size=1, workers=30, sink=out, until_idle=True)
        sizes = [len(set(o["siblings"]) - before) for o in out.iter_new()]
    assert len(sizes) == 2 and max(sizes) <= 2, sizes  # two windows: two processes, not thirty


def test_a_streaming_loop_killed_mid_window_shows_interrupted_and_its_next_run_resumes_after_it(db_path, tmp_path):
    from minikafka.ledger.consuming import failed_run_ids

    log = tmp_path / "offered.log"
    with Source(db_path) as source:
        source.stream("events").extend([{"i": i} for i in range(10)])
        source.topic("sums", WindowSum, dedup=None)
    child = start_child(db_path, log, FREEZE_WINDOW="3")
    wait_frozen(child)
    with Source(db_path) as source:  # alive, mid-window: running
        assert [r["status"] for r in source.runs(stage="summed")] == ["running"]
    child.send_signal(signal.SIGKILL)
    child.wait()
    with Source(db_path) as source:
        killed = source.runs(stage="summed")
        assert [r["status"] for r in killed] == ["interrupted"] and "is gone" in killed[0]["error"]
        assert failed_run_ids(source.ledger.conn) == [killed[0]["run_id"]]
    again = start_child(db_path, log)
    assert again.wait(60) == 0, again.stderr.read()
    assert "resuming after interrupted run " + killed[0]["run_id"] in again.stderr.read()
    with Source(db_path) as source:
        new, old = source.runs(stage="summed")
    assert new["status"] == "succeeded" and new["details"]["resumes_after"] == [killed[0]["run_id"]]
    assert old["status"] == "interrupted" and old["details"]["noticed_by"] == new["run_id"]

"""The sweep of staging that dead runs left: only runs whose stage is not running, only what they marked."""

from __future__ import annotations

import subprocess
import sys

from minikafka.spark import staging as stg


def staged(root, stage: str, run_id: str):
    out = root / stage / run_id / "out" / "t"
    out.mkdir(parents=True)
    (out / "part-0.parquet").write_bytes(b"x")
    (out / "_SUCCESS").write_bytes(b"")
    return root / stage / run_id


def test_a_sweep_removes_a_dead_runs_staging_and_leaves_a_running_stages_and_anything_unmarked(tmp_path):
    ledger, root = tmp_path / "l.sqlite", tmp_path / "staging"
    dead, live = staged(root, "a", "a-1"), staged(root, "b", "b-1")
    other = staged(root, "a", "a-of-another-ledger")  # the same staging root shared by another ledger's runs
    stg.mark_staged(ledger, "a", "a-1", f"file://{dead}")
    stg.mark_staged(ledger, "b", "b-1", f"file://{live}")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(tmp_path / ".minikafka-locks" / "b.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"  # stage b runs now: what it staged it may still commit
        released = []
        assert stg.sweep(ledger, ["a", "b", "c"], release=released.append) == [f"file://{dead}"]
    finally:
        holder.kill()
        holder.wait()
    assert not dead.exists() and live.exists() and other.exists()
    assert released == []  # no engine session was named
    assert [m.run_id for m in stg.read_marks(ledger, "a")] == ["a-1"]  # kept: a late write would be swept next
    assert stg.sweep(ledger, ["a"]) == [] and stg.read_marks(ledger, "a") == []


def test_a_sweep_releases_the_dead_runs_engine_session_before_it_removes_its_staging(tmp_path):
    ledger, root = tmp_path / "l.sqlite", tmp_path / "staging"
    dead = staged(root, "a", "a-1")
    stg.mark_staged(ledger, "a", "a-1", f"file://{dead}", engine="sc://127.0.0.1:15002", session="s-1")
    seen = []
    stg.sweep(ledger, ["a"], release=lambda mark: seen.append((mark.engine, mark.session, dead.exists())))
    assert seen == [("sc://127.0.0.1:15002", "s-1", True)] and not dead.exists()


def test_a_sweep_removes_what_the_one_file_mark_of_earlier_versions_names(tmp_path):
    ledger, root = tmp_path / "l.sqlite", tmp_path / "staging"
    dead = staged(root, "a", "a-1")
    (tmp_path / ".minikafka-locks").mkdir()
    (tmp_path / ".minikafka-locks" / "a.staging").write_text(f"file://{dead}")
    stg.sweep(ledger, ["a"])
    assert not dead.exists() and not (tmp_path / ".minikafka-locks" / "a.staging").exists()

"""Stage processes die with the runner that started them; one run of a stage at a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import StageRunningError
from minikafka.util.filelock import LockBusy, exclusive_lock

ROOT = Path(__file__).resolve().parents[2]

RUNNER = """
import sys, time
from minikafka.util.procs import popen_tied
child = popen_tied([sys.executable, "-c", "import time; time.sleep(300)"])
print(child.pid, flush=True)
time.sleep(300)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_killed_runner_leaves_no_orphan_stage_process():
    runner = subprocess.Popen([sys.executable, "-c", RUNNER], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    child = int(runner.stdout.readline())
    assert alive(child)
    runner.kill()
    runner.wait()
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_a_second_holder_of_a_stage_lock_is_told_who_holds_it(tmp_path):
    path = tmp_path / "s.lock"
    with exclusive_lock(path, note="run first-1"):
        holder = subprocess.run(
            [sys.executable, "-c", "from minikafka.util.filelock import exclusive_lock as L\n"
             f"with L({str(path)!r}): pass"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert holder.returncode != 0 and "run first-1" in holder.stderr
    with exclusive_lock(path):  # released with its holder
        pass


class Item(BaseModel):
    url: str


def test_a_stage_whose_lock_is_held_fails_as_running_and_touches_nothing(tmp_path):
    pytest.importorskip("pyspark")
    from minikafka.spark.stages.stage import Stage, run_stage
    from minikafka.spark.staging import lock_path

    db = tmp_path / "ledger.sqlite"
    with Source(str(db)) as src:
        src.topic("items", Item, dedup=("url",)).extend([{"url": "a"}])
        src.topic("copies", Item, dedup=None)
        stage = Stage("copy", ["items"], ["copies"], transform=lambda df: df)
        holder = subprocess.Popen(
            [sys.executable, "-c", "import sys, time\nfrom minikafka.util.filelock import exclusive_lock as L\n"
             f"with L({str(lock_path(src, 'copy'))!r}, note='run copy-A'):\n print('held', flush=True); time.sleep(60)"],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            assert holder.stdout.readline().strip() == "held"
            with pytest.raises(StageRunningError, match="stage 'copy' is running .*run copy-A"):
                run_stage(None, src, stage)
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        assert src.runs(stage="copy") == []
        assert not (tmp_path / ".minikafka-staging").exists()


def test_lock_busy_names_the_file(tmp_path):
    with exclusive_lock(tmp_path / "x.lock"):
        with pytest.raises(LockBusy, match="x.lock"):
            with exclusive_lock(tmp_path / "x.lock"):
                pass

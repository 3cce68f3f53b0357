"""The engine's JVM process: started tied to its supervisor, lowered below its clients' priority."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from minikafka.spark.engine import EngineProcess

CHILD = """
import sys, threading, time
from pathlib import Path
flag = Path(sys.argv[1])
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
print("up", flush=True)
while not flag.exists():
    time.sleep(0.02)
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # started after the lowering
print("again", flush=True)
time.sleep(60)
"""


def _until(path: Path, text: str) -> None:
    deadline = time.time() + 30
    while text not in path.read_text() and time.time() < deadline:
        time.sleep(0.02)
    assert text in path.read_text()


def _niceness(pid: int) -> list[int]:
    return [int((t / "stat").read_text().rsplit(")", 1)[1].split()[16]) for t in Path(f"/proc/{pid}/task").iterdir()]


def test_a_lowered_engine_runs_every_thread_at_the_lower_priority_and_so_do_threads_it_starts_later(tmp_path):
    log, flag = tmp_path / "engine.log", tmp_path / "go"
    proc = EngineProcess([sys.executable, "-c", CHILD, str(flag)], log)
    try:
        _until(log, "up")
        proc.lower_priority(7)
        assert len(_niceness(proc.pid)) >= 2 and set(_niceness(proc.pid)) == {7}
        flag.touch()
        _until(log, "again")
        assert len(_niceness(proc.pid)) >= 3 and set(_niceness(proc.pid)) == {7}
    finally:
        proc.stop(timeout=5)
    assert not proc.running()

"""util.liveness: is the process a 'running' run row names still there? Exactly, not by pid alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from minikafka.util import liveness


def test_this_process_is_alive_and_a_pid_reused_by_another_process_is_gone():
    mine = liveness.this_process()
    assert liveness.process_state(mine) == "alive"
    assert liveness.process_state({**mine, "start": "1@" + mine["start"].split("@")[1]}) == "gone"


def test_a_dead_child_not_yet_reaped_by_its_parent_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    name = {**liveness.this_process(), "pid": child.pid, "start": liveness.start_time(child.pid)}
    deadline = time.monotonic() + 30
    while os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:  # exited, kept a zombie
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert liveness.process_state(name) == "gone"
    child.wait()
    assert liveness.process_state(name) == "gone"


def test_a_row_that_names_no_process_is_unknown():
    assert liveness.process_state(None) == "unknown"
    assert liveness.process_state({"host": liveness.host_name()}) == "unknown"

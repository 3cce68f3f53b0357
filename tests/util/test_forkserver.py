"""The fork server behind the stage host: a forked child is the fresh process it replaces
(argv, cwd, environment, pipes, process group, exit status), runs the script as it is now,
dies with its host and its caller, and a host that is gone means fresh processes, not errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from minikafka.util.forkserver import ForkServer, HostedProcess
from minikafka.util.procs import child_env, kill_group
from tests.util.test_procs import alive

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, os, sys
    import helper
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "pid": os.getpid(), "pgid": os.getpgid(0),
                      "marker": os.environ.get("FS_MARKER"), "name": __name__, "path0": sys.path[0],
                      "helper": helper.VERSION, "script": 1}))
    print("to stderr", file=sys.stderr)
    raise SystemExit(int(sys.argv[1]))
""")


def wait_until(check, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def scripts(tmp_path):
    (tmp_path / "job.py").write_text(SCRIPT)
    (tmp_path / "helper.py").write_text("VERSION = 1\n")
    return tmp_path


@pytest.fixture
def host():
    server = ForkServer(["json"], env=child_env())
    try:
        yield server
    finally:
        server.close()


def launch(server: ForkServer, script: Path, *args: str, env: dict | None = None, **kw):
    return server.popen([sys.executable, str(script), *args], env=env or child_env(), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True, **kw)


def test_a_forked_child_is_its_own_process_with_the_callers_argv_cwd_environment_pipes_and_exit_code(
        host, scripts, monkeypatch):
    import json

    monkeypatch.chdir(scripts)
    proc = launch(host, scripts / "job.py", "3", env={**child_env(), "FS_MARKER": "m1"})
    out, err = proc.communicate()
    assert isinstance(proc, HostedProcess) and proc.returncode == 3
    seen = json.loads(out)
    assert seen["argv"] == [str(scripts / "job.py"), "3"] and seen["cwd"] == str(scripts)
    assert seen["marker"] == "m1" and seen["name"] == "__main__" and seen["path0"] == str(scripts)
    assert seen["pid"] == proc.pid != host.pid and seen["pgid"] == proc.pid  # its own process group
    assert err == "to stderr\n"


def test_a_script_and_its_modules_edited_on_the_same_host_run_as_edited(host, scripts):
    import json

    first, _ = launch(host, scripts / "job.py", "0").communicate()
    (scripts / "helper.py").write_text("VERSION = 2\n")
    (scripts / "job.py").write_text(SCRIPT.replace('"script": 1', '"script": 2'))
    second, _ = launch(host, scripts / "job.py", "0").communicate()
    assert (json.loads(first)["script"], json.loads(first)["helper"]) == (1, 1)
    assert (json.loads(second)["script"], json.loads(second)["helper"]) == (2, 2)


def test_an_uncaught_exception_prints_its_traceback_and_exits_1(host, tmp_path):
    (tmp_path / "boom.py").write_text("raise ValueError('boom')\n")
    proc = launch(host, tmp_path / "boom.py")
    out, err = proc.communicate()
    assert proc.returncode == 1 and "ValueError: boom" in err and "Traceback" in err


def test_kill_group_kills_a_hosted_child_and_its_status_is_the_signal(host, tmp_path):
    (tmp_path / "sleep.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(300)\n")
    proc = launch(host, tmp_path / "sleep.py")
    kill_group(proc)
    assert proc.returncode == -signal.SIGKILL
    proc.communicate()
    assert not alive(proc.pid) and alive(host.pid)


def test_a_host_that_cannot_import_its_modules_means_fresh_processes(scripts):
    with ForkServer(["no_such_module_here"], env=child_env()) as server:
        proc = launch(server, scripts / "job.py", "0", env={**child_env(), "PYTHONPATH": str(scripts)})
        proc.communicate()
        assert isinstance(proc, subprocess.Popen) and proc.returncode == 0
        assert "cannot import no_such_module_here" in server.reason


def test_a_killed_host_means_fresh_processes_and_a_child_lost_with_it_starts_again_when_asked(host, tmp_path):
    (tmp_path / "count.py").write_text(textwrap.dedent("""
        import os, sys, time
        with open(sys.argv[1], "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        if sys.argv[2] == "wait":
            time.sleep(300)
    """))
    tries = tmp_path / "tries.txt"
    assert host.ready()
    proc = launch(host, tmp_path / "count.py", str(tries), "wait", retry=lambda: True)
    assert wait_until(lambda: tries.exists() and tries.read_text())
    os.kill(host.pid, signal.SIGKILL)
    # the child dies with its host; asked to, it starts again as a fresh process (which is told not to wait)
    (tmp_path / "count.py").write_text((tmp_path / "count.py").read_text().replace('"wait"', '"no such mode"'))
    out, err = proc.communicate()
    assert proc.returncode == 0 and proc.host_lost, err
    first, again = (int(p) for p in tries.read_text().split())
    assert again == proc.pid and wait_until(lambda: not alive(first), timeout=10)
    later = launch(host, tmp_path / "count.py", str(tries), "go")
    later.communicate()
    assert isinstance(later, subprocess.Popen) and later.returncode == 0 and "died" in host.reason


def test_a_child_lost_with_its_host_is_killed_when_not_retried(host, tmp_path):
    (tmp_path / "sleep.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(300)\n")
    proc = launch(host, tmp_path / "sleep.py", retry=lambda: False)
    os.kill(host.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL and proc.host_lost
    assert wait_until(lambda: not alive(proc.pid), timeout=10)


CALLER = """
import subprocess, sys
from minikafka.util.forkserver import ForkServer
from minikafka.util.procs import child_env
server = ForkServer(["json"], env=child_env())
child = server.popen([sys.executable, sys.argv[1]], env=child_env())
print(server.pid, child.pid, flush=True)
child.wait()
"""


def test_a_sigkilled_caller_leaves_no_host_and_no_child(tmp_path):
    (tmp_path / "sleep.py").write_text("import time\ntime.sleep(300)\n")
    caller = subprocess.Popen([sys.executable, "-c", CALLER, str(tmp_path / "sleep.py")], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    host_pid, child_pid = (int(p) for p in caller.stdout.readline().split())
    assert alive(host_pid) and alive(child_pid)
    caller.kill()
    caller.wait()
    assert wait_until(lambda: not alive(host_pid) and not alive(child_pid), timeout=10)


def test_close_stops_the_host(scripts):
    server = ForkServer(["json"], env=child_env())
    assert server.ready()
    server.close()
    assert server.proc.returncode is not None and not alive(server.pid)


def test_a_child_that_needs_no_deferred_module_is_forked_before_the_host_imports_it(tmp_path):
    import json

    (tmp_path / "slowmod.py").write_text("import time\ntime.sleep(1.5)\n")
    (tmp_path / "slowbase.py").write_text("import time\ntime.sleep(1.0)\n")  # both requests queue meanwhile
    (tmp_path / "which.py").write_text("import json, sys, time\n"
                                       "print(json.dumps({'t': time.time(), 'slowmod': 'slowmod' in sys.modules}))\n")
    env = {**child_env(), "PYTHONPATH": os.pathsep.join([child_env()["PYTHONPATH"], str(tmp_path)])}
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.time()
    with ForkServer(["slowbase"], later=["slowmod"], env=env) as server:
        with ThreadPoolExecutor(1) as pool:  # as the runner does: each stage starts in its own thread
            needing = pool.submit(launch, server, tmp_path / "which.py", env=env, needs=["slowmod"])
            plain = launch(server, tmp_path / "which.py", env=env)
            first, second = (json.loads(p.communicate()[0]) for p in (needing.result(), plain))
    assert first["slowmod"] and first["t"] - t0 >= 2.4  # forked once the host had imported it
    assert not second["slowmod"] and second["t"] < first["t"]  # forked at once, not behind the import


def test_modules_asked_for_after_the_host_started_are_imported_before_a_child_that_needs_them(tmp_path):
    import json

    (tmp_path / "asked.py").write_text("import time\ntime.sleep(0.5)\n")
    (tmp_path / "which.py").write_text("import json, sys\nprint(json.dumps({'asked': 'asked' in sys.modules}))\n")
    env = {**child_env(), "PYTHONPATH": os.pathsep.join([child_env()["PYTHONPATH"], str(tmp_path)])}
    with ForkServer(["json"], env=env) as server:  # started before anyone knew a child would need 'asked'
        server.preload(["asked"])
        needing = launch(server, tmp_path / "which.py", env=env, needs=["asked"])
        assert isinstance(needing, HostedProcess)
        assert json.loads(needing.communicate()[0]) == {"asked": True}  # imported in the host, before the fork

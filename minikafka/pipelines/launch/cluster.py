"""Start and stop a Spark standalone master and worker on 127.0.0.1 (pyspark's spark-class)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unshare_permitted() -> str | None:
    """None when ``unshare --mount`` with a tmpfs mount works here, else why not."""
    import shutil

    if shutil.which("unshare") is None:
        return "the unshare command is not installed (util-linux)"
    try:
        proc = subprocess.run(["unshare", "--mount", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    if proc.returncode != 0:
        return f"unshare --mount is not permitted here: {proc.stderr.strip()}"
    return None


@contextmanager
def standalone_cluster(*, port: int | None = 7077, cores: int = 2, memory: str = "2g",
                       log_dir: str | Path = "logs", hide: list[str | Path] | None = None):
    """A master and one worker on 127.0.0.1 for the duration of the block; yields the master URL.

    ``port=None`` picks a free port. ``hide``: directories the worker (and so its
    executors) must not see: the worker runs in its own mount namespace with a tmpfs
    mounted over each, as if it ran on another host (needs root and ``unshare``).
    """
    import shlex

    import pyspark

    port = port or free_port()
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    try:
        with open(log_dir / "spark-master.log", "w") as out:
            procs.append(subprocess.Popen(
                [spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                 "--webui-port", "0"], env=env, stdout=out, stderr=subprocess.STDOUT))
        _wait_port(port, 90)
        worker_log = log_dir / "spark-worker.log"
        worker = [spark_class(), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores",
                  str(cores), "--memory", memory, "--webui-port", "0", "--work-dir", str((log_dir / "work").resolve()),
                  url]
        if hide:
            mounts = " && ".join(f"mount -t tmpfs tmpfs {shlex.quote(str(Path(d).resolve()))}" for d in hide)
            worker = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                      f"{mounts} && exec {shlex.join(worker)}"]
        with open(worker_log, "w") as out:
            procs.append(subprocess.Popen(worker, env=env, stdout=out, stderr=subprocess.STDOUT))
        deadline = time.time() + 90
        while "Successfully registered with master" not in worker_log.read_text():
            if time.time() > deadline or procs[-1].poll() is not None:
                raise RuntimeError(f"the Spark worker did not register; see {worker_log}")
            time.sleep(0.5)
        yield url
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

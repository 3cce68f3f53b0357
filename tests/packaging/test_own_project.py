"""A team's own project, set up and run from the docs alone: docs/getting-started/your-own-project.md.

An empty directory outside the repository and a virtualenv holding the built wheel (and nothing
of the checkout on the import path); the page's blocks run there in order, as written (files
saved, shell commands run with the virtualenv's ``minikafka`` and ``python`` first on PATH,
printed output and exit codes checked as tests/docs/runner.py does). Between the blocks the
test asks the ledger, through the commands' ``--json``, what each step did: the backfill loaded
the CSV's rows into a topic declared and never created; the first night succeeded; the killed
night shows ``interrupted`` and fails ``health``; the next run resumes after it and ``health``
passes; ``evolve`` added the optional field and the next ingest kept it; the project's own
pytest test passed.

The virtualenv gets the wheel with ``--no-deps``; its heavy dependencies (pyspark,
great-expectations, pytest, chispa) are this environment's, through a ``.pth`` line, so the
test installs nothing from the package index (tests/packaging/test_wheel_install.py checks the
wheel's own dependencies). Every process the page starts runs in the project's directory: one
still running there at the end (a JVM, an engine) fails the test, and is killed.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import venv
from pathlib import Path

import pytest

from tests.docs.runner import Block, BlockFailed, Session, blocks_of

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started" / "your-own-project.md"

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def project_venv(built_wheel, tmp_path_factory) -> Path:
    """A virtualenv with the wheel installed (no dependencies); this environment's site-packages
    after its own on the import path. Its ``bin`` directory."""
    work = tmp_path_factory.mktemp("own-project-venv")
    venv.EnvBuilder(with_pip=False, clear=True, symlinks=True).create(work / "venv")
    python = work / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # before the .pth exists: pip sees only the new virtualenv, so the checkout's own install of
    # minikafka-spark is not taken for the wheel installed already
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                          "--quiet", str(built_wheel)], env=env, text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=300)
    assert pip.returncode == 0, pip.stdout
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          env=env, text=True, capture_output=True, check=True).stdout.strip()
    # path lines only: the directories' own .pth files (an editable install of the checkout) are not run
    ours = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    Path(site, "zz_test_dependencies.pth").write_text("".join(f"{d}\n" for d in ours))
    where = subprocess.run([str(python), "-c", "import minikafka; print(minikafka.__file__)"], cwd=work, env=env,
                           text=True, capture_output=True, timeout=60)
    assert where.returncode == 0 and where.stdout.startswith(site), where.stdout + where.stderr
    return python.parent


class ProjectSession(Session):
    """The page's blocks in ``directory`` with the virtualenv's commands first on PATH, no
    PYTHONPATH and none of minikafka's variables (a user's shell)."""

    def __init__(self, directory: Path, bin_dir: Path):  # no checkout copied in, no pythonpath link
        self.dir, self.bin = directory, bin_dir
        self.envfile = directory.parent / "shell.env"
        self.namespace: dict = {}
        self.last_output = ""
        self.modules_before = set(sys.modules)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("MINIKAFKA_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.bin.parent)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def _python(self, block: Block) -> None:
        raise BlockFailed(f"{block.where}: a Python block runs in the test's process, not the project's "
                          "virtualenv: show it as a file saved and run")

    def mk(self, *args: str) -> subprocess.CompletedProcess:
        """``minikafka ARGS`` in the project, as the page's commands run."""
        return subprocess.run([str(self.bin / "minikafka"), *args], cwd=self.dir, env=self.env(), text=True,
                              capture_output=True, timeout=120)

    def json(self, *args: str):
        proc = self.mk(*args, "--json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(proc.stdout)

    def latest_stage_run(self) -> dict:
        runs = self.json("status", "--pipeline", "flights.toml", "--stage", "daily", "--limit", "1")
        assert len(runs) == 1, runs
        return runs[0]

    def health(self) -> tuple[int, dict]:
        proc = self.mk("health", "--pipeline", "flights.toml", "--json")
        report = json.loads(proc.stdout)
        return proc.returncode, {c["name"]: c for c in report["checks"]}


def processes_in(directory: Path) -> list[int]:
    """The pids of the processes whose working directory is ``directory`` or below it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:  # gone, or not ours to read
            continue
        if cwd == directory or directory in cwd.parents:
            found.append(int(entry.name))
    return found


def still_running_after(directory: Path, seconds: float) -> list[str]:
    """The command lines of the processes still running in ``directory`` once ``seconds`` have
    passed, or none as soon as none is left."""
    deadline = time.monotonic() + seconds
    while (pids := processes_in(directory)) and time.monotonic() < deadline:
        time.sleep(0.1)
    out = []
    for pid in pids:
        try:
            out.append(f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:300])
        except OSError:
            pass
    return out


def test_a_new_project_set_up_from_the_docs_alone_backfills_runs_shows_a_killed_night_evolves_and_tests(
        project_venv, tmp_path):
    project = (tmp_path / "flights-project").resolve()
    project.mkdir()
    session = ProjectSession(project, project_venv)
    steps = [b for b in blocks_of(PAGE) if b.runs]
    assert steps and not any(b.spark and b.lang not in ("bash", "sh") for b in steps)
    killed: dict = {}
    done: list[str] = []
    took: list[str] = []  # each block's seconds, printed (pytest shows them with -rP or on a failure)
    try:
        for block in steps:
            started = time.monotonic()
            session.run(block)
            took.append(f"{block.where}: {time.monotonic() - started:.1f} s")
            text = block.text
            if {"output", "save", "exit"} & set(block.directives):  # checked by the page, as the runner does
                continue
            if "minikafka backfill" in text:
                with open(project / "reference" / "airlines.csv", newline="") as f:
                    carriers = sorted(row["carrier"] for row in csv.DictReader(f))
                topics = {t["topic"]: t for t in session.json("topics", "--pipeline", "flights.toml")}
                assert set(topics) == {"airlines", "flights", "carrier_day"}  # declared, never created by hand
                assert topics["airlines"]["total"] == len(carriers) == 5
                shown = session.json("show", "airlines", "--pipeline", "flights.toml", "--limit", "0")
                assert sorted(r["carrier"] for r in shown) == carriers
                done.append("backfill")
            elif text.startswith("minikafka nightly"):
                run = session.latest_stage_run()
                assert (run["status"], run["rows_in"]) == ("succeeded", 4), run
                done.append("first night")
            elif "kill -9" in text:
                run = session.latest_stage_run()
                assert run["status"] == "interrupted", run
                killed = run
                code, checks = session.health()
                assert code != 0 and checks["stage daily last run"]["state"] == "fail", checks
                assert still_running_after(project, seconds=10) == [], "the killed night left a process behind"
                done.append("killed")
            elif text.startswith("minikafka run"):
                run = session.latest_stage_run()
                assert run["status"] == "succeeded" and run["rows_in"] == 3, run
                assert run["details"]["resumes_after"] == [killed["run_id"]], run["details"]
                code, checks = session.health()
                assert code == 0 and checks["stage daily last run"]["state"] == "ok", checks
                done.append("resumed")
            elif "minikafka evolve" in text:
                schema = session.json("schema", "flights", "--pipeline", "flights.toml")
                assert "tail_number" in [c["name"] for c in schema["columns"]], schema
                done.append("evolved")
            elif "minikafka ingest" in text:
                rows = session.json("show", "flights", "--pipeline", "flights.toml", "--from-id", "8")
                assert [(r["flight_id"], r["tail_number"]) for r in rows] == [(8, "N37502"), (9, "N101NN")]
                older = session.json("show", "flights", "--pipeline", "flights.toml", "--limit", "1")
                assert older[0]["tail_number"] is None
                done.append("kept the new field")
            elif "pytest" in text:
                assert "1 passed" in session.last_output, session.last_output
                done.append("own test")
        assert done == ["backfill", "first night", "killed", "resumed", "evolved", "kept the new field", "own test"]
        started = time.monotonic()
        left = still_running_after(project, seconds=20)  # a JVM whose driver ended is given time to exit
        took.append(f"processes gone: {time.monotonic() - started:.1f} s")
        assert left == [], f"processes still running in the project: {left}"
    finally:
        print("\n".join(took))
        session.close()
        for pid in processes_in(project):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

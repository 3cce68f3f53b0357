"""The built wheel installs into a fresh virtualenv and the quickstart runs there without Java.

The wheel is built with ``python -m build``; the virtualenv gets it with its dependencies from
the package index, at the versions in constraints.txt (pip's cache keeps this quick after
the first run). PATH holds no ``java``: the pure-Python API needs no JVM, and a Spark path
says in one line what to install.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

QUICKSTART = """
from pydantic import BaseModel
from minikafka import Source

class Item(BaseModel):
    url: str
    title: str

with Source("quickstart.sqlite") as source:
    items = source.topic("items", Item, dedup=("url",))
    items.append({"url": "https://example.com/1", "title": "Hello"}, on_duplicate="ignore")
    for record in items.iter_new(records=True):
        print(record.id, record.data.title)
        record.ack()
    print("handled", items.count("handled"))
"""


def _minikafkas(key: str) -> bool:
    """minikafka's own variables, which the user's environment would not have; not the test's engine
    directory (conftest): an engine the examples start is the test's, never the user's."""
    return key.startswith("MINIKAFKA_") and key != "MINIKAFKA_ENGINE_DIR"


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("env", _clean(dict(os.environ)))
    return subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kwargs)


def _clean(env: dict[str, str]) -> dict[str, str]:
    """Without PYTHONPATH (a checkout on it holds minikafka_spark.egg-info: pip would take the
    wheel for installed already) and without minikafka's own variables."""
    return {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not _minikafkas(k)}


def _without_java(env: dict[str, str], bin_dir: Path, scratch: Path) -> dict[str, str]:
    """The environment with the virtualenv first on PATH and no ``java`` anywhere on it: a
    directory on PATH that holds ``java`` is replaced by links to everything else in it."""
    dirs = [str(bin_dir)]
    for i, d in enumerate(p for p in env.get("PATH", "").split(os.pathsep) if p):
        if d == str(Path(sys.executable).parent):
            continue
        if not (Path(d) / "java").exists():
            dirs.append(d)
            continue
        copy = scratch / f"path-{i}"
        copy.mkdir(parents=True, exist_ok=True)
        for entry in Path(d).iterdir():
            if entry.name != "java" and not (copy / entry.name).exists():
                (copy / entry.name).symlink_to(entry)
        dirs.append(str(copy))
    out = {k: v for k, v in env.items() if k not in ("JAVA_HOME", "PYTHONPATH", "VIRTUAL_ENV", "SPARK_HOME")
           and not _minikafkas(k)}
    out["PATH"] = os.pathsep.join(dirs)
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory, built_wheel):
    work = tmp_path_factory.mktemp("wheel")
    wheel = built_wheel  # tests/packaging/conftest.py: built once per test session
    venv.EnvBuilder(with_pip=True, clear=True).create(work / "venv")
    python = work / "venv" / "bin" / "python"
    pip = _run([str(python), "-m", "pip", "install", "--quiet", "-c", str(ROOT / "constraints.txt"), str(wheel)],
               timeout=600)
    assert pip.returncode == 0, pip.stdout
    return work, python, wheel


@pytest.mark.slow
def test_the_wheel_holds_the_library_only(installed):
    import zipfile

    _, _, wheel = installed
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"minikafka", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}, tops


@pytest.mark.slow
def test_the_quickstart_runs_in_a_fresh_virtualenv_without_java(installed):
    work, python, _ = installed
    env = _without_java(dict(os.environ), python.parent, work / "nojava")
    assert _run(["bash", "-c", "command -v java || true"], env=env).stdout.strip() == ""
    (work / "run").mkdir(exist_ok=True)
    first = _run([str(python), "-c", QUICKSTART], cwd=work / "run", env=env, timeout=120)
    assert first.returncode == 0 and first.stdout.splitlines() == ["1 Hello", "handled 1"], first.stdout
    again = _run([str(python), "-c", QUICKSTART], cwd=work / "run", env=env, timeout=120)
    assert again.returncode == 0 and again.stdout.splitlines() == ["handled 1"], again.stdout
    version = _run([str(python.parent / "minikafka"), "--version"], env=env, timeout=60)
    assert version.returncode == 0 and "0." in version.stdout, version.stdout


@pytest.mark.slow
def test_a_spark_path_without_the_spark_extra_names_what_to_install(installed):
    work, python, _ = installed
    env = _without_java(dict(os.environ), python.parent, work / "nojava")
    proc = _run([str(python), "-c", "import minikafka.spark"], cwd=work, env=env, timeout=60)
    assert proc.returncode != 0
    assert proc.stdout.strip().splitlines()[-1] == (
        "minikafka.errors.MissingDependencyError: pyspark is not installed: pip install 'minikafka-spark[spark]'")


@pytest.mark.slow
def test_the_wheel_holds_the_consoles_templates_and_static_files(installed):
    import zipfile

    _, _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "minikafka" / "console").rglob("*")
               if p.is_file() and p.suffix in (".html", ".css", ".js")}
    assert shipped and shipped <= names, sorted(shipped - names)


@pytest.mark.slow
def test_the_installed_wheel_registers_the_stage_harness_as_a_pytest_plugin(installed):
    """pytest loads the fixtures of minikafka.testing.plugin from the ``pytest11`` entry point,
    named after the module (so ``-p minikafka.testing.plugin`` never registers it twice); the
    harness imports without pytest or pyspark."""
    work, python, _ = installed
    code = ("from importlib.metadata import entry_points; import minikafka.testing; "
            "print([(e.name, e.value) for e in entry_points(group='pytest11') if e.value.startswith('minikafka')])")
    proc = _run([str(python), "-c", code], cwd=work, timeout=60)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip() == "[('minikafka.testing.plugin', 'minikafka.testing.plugin')]", proc.stdout

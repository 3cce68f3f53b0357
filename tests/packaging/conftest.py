"""The wheel, built once per test session from a copy of the checkout (setuptools writes build/
inside the tree it builds, and nothing else running at the same time may touch it there)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Path:
    """The path of ``minikafka_spark-*.whl`` built by ``python -m build --wheel``."""
    pytest.importorskip("build", reason="the dev extra (build) is not installed")
    work = tmp_path_factory.mktemp("wheel-build")
    tree = work / "src"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".venv", ".git", "build", "dist", "data", "site",
                                                               "*.egg-info", "__pycache__", ".pytest_cache"))
    # without PYTHONPATH: a checkout on it holds minikafka_spark.egg-info
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(tree)],
                           env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    assert built.returncode == 0, built.stdout
    wheel, = (work / "dist").glob("minikafka_spark-*.whl")
    return wheel

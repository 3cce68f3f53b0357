"""scripts/nightly.sh: the checkout's thin wrapper of ``minikafka nightly`` (lock, a log per night, exit codes).

What the night does is tested on ``minikafka nightly`` itself (tests/pipelines/test_nightly_command.py);
here only that the wrapper hands over: logs and the lock in the checkout's logs/, run options on.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minikafka import Source
from tests.pipelines.helpers import ROOT, homelab_copy


@pytest.fixture
def repo(tmp_path):
    """A copy of the script beside a .venv whose bin/minikafka is this checkout's command."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "nightly.sh", root / "scripts" / "nightly.sh")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "minikafka").write_text(f"#!/bin/sh\nexec {sys.executable} -m minikafka.cli \"$@\"\n")
    (bin_dir / "minikafka").chmod(0o755)
    return root


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_the_wrapper_runs_minikafka_nightly_with_its_log_and_lock_in_logs(repo, tmp_path):
    pipeline = homelab_copy(tmp_path)
    Source(str(tmp_path / "homelab.sqlite")).close()  # run never creates the ledger
    ok = subprocess.run(["bash", "scripts/nightly.sh", str(pipeline), "--strategy", "best_effort"], cwd=repo,
                        env=_env(), capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (log,) = (repo / "logs").glob("nightly-*.log")
    text = log.read_text()
    assert "exit 0" in text and "total" in text and f"minikafka run {pipeline} --strategy best_effort" in text
    with open(repo / "logs" / ".nightly.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        busy = subprocess.run(["bash", "scripts/nightly.sh", str(pipeline)], cwd=repo, env=_env(),
                              capture_output=True, text=True)
    assert busy.returncode == 75 and "another nightly run" in busy.stdout + busy.stderr


def test_the_wrapper_exits_2_on_a_bad_pipeline(repo, tmp_path):
    bad = Path(tmp_path / "bad.toml")
    bad.write_text("[pipeline]\n")
    run = subprocess.run(["bash", "scripts/nightly.sh", str(bad)], cwd=repo, env=_env(), capture_output=True, text=True)
    assert run.returncode == 2
    assert "missing key 'source'" in next((repo / "logs").glob("nightly-*.log")).read_text()


def test_the_wrappers_night_is_followed_by_health_and_a_failing_check_exits_3(repo, tmp_path):
    pipeline = homelab_copy(tmp_path, replace={'[topics."rss.items"]\n': '[topics."rss.items"]\nfreshness = "26h"\n'})
    Source(str(tmp_path / "homelab.sqlite")).close()
    run = subprocess.run(["bash", "scripts/nightly.sh", str(pipeline)], cwd=repo, env=_env(), capture_output=True,
                         text=True)
    log = next((repo / "logs").glob("nightly-*.log")).read_text()
    assert "minikafka health --pipeline" in log
    assert "fail  topic rss.items freshness: no rows yet (limit 26h)" in log
    assert run.returncode == 3, log
    assert "exit 3" in log

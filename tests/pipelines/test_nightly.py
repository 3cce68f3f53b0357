"""scripts/nightly.sh: lock, log per night, exit codes."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from minikafka import Source
from tests.pipelines.helpers import ROOT, homelab_copy


@pytest.fixture
def repo(tmp_path):
    """A copy of the scripts next to the real venv, so logs land in tmp."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "nightly.sh", root / "scripts" / "nightly.sh")
    (root / ".venv").symlink_to(ROOT / ".venv")
    return root


def test_lock_prevents_overlap_and_empty_run_logs_and_exits_0(repo, tmp_path):
    pipeline = homelab_copy(tmp_path)
    Source(str(tmp_path / "homelab.sqlite")).close()  # run never creates the ledger
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run(["bash", "scripts/nightly.sh", str(pipeline)], cwd=repo, env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    (log,) = (repo / "logs").glob("nightly-*.log")
    assert "exit 0" in log.read_text() and "total" in log.read_text()
    with open(repo / "logs" / ".nightly.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        busy = subprocess.run(["bash", "scripts/nightly.sh", str(pipeline)], cwd=repo, env=env,
                              capture_output=True, text=True)
    assert busy.returncode == 75 and "another nightly run" in busy.stderr


def test_bad_pipeline_exits_non_zero(repo, tmp_path):
    bad = Path(tmp_path / "bad.toml")
    bad.write_text("[pipeline]\n")
    run = subprocess.run(["bash", "scripts/nightly.sh", str(bad)], cwd=repo, capture_output=True, text=True)
    assert run.returncode == 2
    assert "missing key 'source'" in next((repo / "logs").glob("nightly-*.log")).read_text()


def test_the_nightly_run_is_followed_by_health_and_a_failing_check_exits_3(repo, tmp_path):
    pipeline = homelab_copy(tmp_path, replace={'[topics."rss.items"]\n': '[topics."rss.items"]\nfreshness = "26h"\n'})
    Source(str(tmp_path / "homelab.sqlite")).close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(["bash", "scripts/nightly.sh", str(pipeline)], cwd=repo, env=env, capture_output=True,
                         text=True)
    log = next((repo / "logs").glob("nightly-*.log")).read_text()
    assert "minikafka health --pipeline" in log
    assert "fail  topic rss.items freshness: no rows yet (limit 26h)" in log
    assert run.returncode == 3, log
    assert "exit 3" in log

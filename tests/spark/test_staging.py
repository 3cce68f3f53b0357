"""Staging per run, the stage lock, the count check, and the exchange path on a local master."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.errors import StageRunningError, StagingError
from minikafka.spark import run_stage
from minikafka.spark import staging as stg
from minikafka.spark.stages.stage import StageFailed
from minikafka.util.faults import ENV, MODE_ENV
from tests.spark.crash_child import Doubled, Item, open_topics, stage
from tests.spark.test_crash import ROOT, N, seed, snapshot

pytestmark = [pytest.mark.spark]


def staged_files(ledger: str) -> list[Path]:
    return sorted(p for p in (Path(ledger).parent / ".minikafka-staging").rglob("*.parquet"))


@pytest.mark.slow
def test_a_second_run_while_the_first_is_stopped_after_staging_changes_nothing_and_the_first_commits_all(
        spark, tmp_path):
    """The soak's race: run A stopped (SIGSTOP) with its output staged, run B of the same stage
    started meanwhile. B must not touch A's staging; A, continued, commits every row once."""
    path = str(tmp_path / "ledger.sqlite")
    seed(path)
    env = {**os.environ, ENV: "stage:staged", MODE_ENV: "stop", "PYTHONPATH": str(ROOT)}
    a = subprocess.Popen([sys.executable, "-m", "tests.spark.crash_child", path], cwd=ROOT, env=env,
                         stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for line in a.stderr:
            if line.startswith("FROZEN stage:staged"):
                break
        else:
            pytest.fail(f"run A ended before staging (exit {a.wait()})")
        os.waitid(os.P_PID, a.pid, os.WSTOPPED)  # A has stopped itself
        staged = staged_files(path)
        assert staged
        with Source(path) as src:
            open_topics(src)
            with pytest.raises(StageRunningError, match="stage 'double' is running"):
                run_stage(spark, src, stage())
        assert staged_files(path) == staged  # B touched nothing of A's
    finally:
        os.kill(a.pid, signal.SIGCONT)
    out, _ = a.communicate(timeout=300)
    assert a.returncode == 0 and "succeeded" in out
    result = snapshot(path)
    assert result["doubled"] == sorted((f"u{i}", 2 * i) for i in range(N))
    assert result["items_new"] == 0 and result["committed_runs"] == 1
    assert staged_files(path) == []


def test_staged_rows_that_differ_from_what_spark_wrote_commit_nothing(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "ledger.sqlite")
    seed(path)
    real = stg.write_counted
    monkeypatch.setattr(stg, "write_counted", lambda df, uri, **kw: real(df, uri, **kw) + 1)
    with Source(path) as src:
        open_topics(src)
        with pytest.raises(StageFailed, match=r"Spark reported writing 3,001 row\(s\), the driver read 3,000"):
            run_stage(spark, src, stage())
        assert src.topic("doubled", Doubled, dedup=None).count() == 0
        assert src.topic("items", Item, dedup=("url",)).count("new") == N
    monkeypatch.undo()
    assert staged_files(path) == []


def test_exchange_staging_on_a_local_master_gives_the_jdbc_result(spark, tmp_path):
    jdbc, exchange = str(tmp_path / "a" / "ledger.sqlite"), str(tmp_path / "b" / "ledger.sqlite")
    shared = tmp_path / "shared"
    shared.mkdir()
    for path, staging in ((jdbc, None), (exchange, f"file://{shared}")):
        Path(path).parent.mkdir()
        seed(path)
        with Source(path) as src:
            open_topics(src)
            run = run_stage(spark, src, stage(), staging=staging)
            assert run.details["staging"] == ("exchange" if staging else "jdbc")
    assert snapshot(exchange) == snapshot(jdbc)
    assert [p for p in shared.rglob("*") if p.is_file()] == []  # the run's staging is removed after the commit


def test_a_missing_or_unwritable_staging_location_is_named_and_nothing_runs(spark, tmp_path):
    path = str(tmp_path / "ledger.sqlite")
    seed(path)
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    with Source(path) as src:
        open_topics(src)
        with pytest.raises(StagingError, match=f"staging location file://{tmp_path}/nowhere does not exist"):
            run_stage(spark, src, stage(), staging=str(tmp_path / "nowhere"))
        if os.geteuid() != 0:  # root writes anywhere
            with pytest.raises(StagingError, match="is not writable"):
                run_stage(spark, src, stage(), staging=str(locked))
        assert src.topic("items", Item, dedup=("url",)).count("new") == N


def test_a_non_local_master_without_a_staging_uri_is_refused():
    with pytest.raises(StagingError, match="give a staging URI every node sees"):
        stg.choose_staging("spark://10.0.0.1:7077", None, "/data/ledger.sqlite")
    assert stg.choose_staging("local[2]", None, "/data/l.sqlite") == stg.StagingArea(
        "file:///data/.minikafka-staging", exchange=False)
    assert stg.choose_staging("yarn", "s3a://bucket/mk", "/data/l.sqlite").exchange

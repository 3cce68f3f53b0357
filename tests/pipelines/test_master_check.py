"""An unreachable Spark master is named within seconds, before any JVM, and every failed run is in the run log."""

from __future__ import annotations

import socket
import time

import pytest

from minikafka import Source
from minikafka.pipelines import load_pipeline
from minikafka.pipelines import runner as runner_module
from minikafka.pipelines.launch import submit
from minikafka.spark.session import MasterUnreachableError, check_master, master_addresses
from tests.cli.helpers import invoke
from tests.pipelines.helpers import homelab_copy
from tests.util.ports import unused_port


@pytest.fixture
def no_jvm(monkeypatch):
    """Fail the test if anything would start a JVM or spark-submit."""
    def refuse(*args, **kwargs):
        raise AssertionError("a JVM was started")

    monkeypatch.setattr("minikafka.spark.session.build_session", refuse)
    monkeypatch.setattr("minikafka.util.procs.run_tied", refuse)


def _runs(tmp_path):
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        return src.runs()


def _seed(tmp_path, n=2):
    from schemas.homelab import RssItem

    with Source(str(tmp_path / "homelab.sqlite")) as src:
        src.topic("rss.items", RssItem, dedup=("url",)).extend(
            [{"title": f"t{i}", "url": f"https://example.com/{i}", "feed": "f", "body": "b",
              "published": "2026-01-01T00:00:00Z"}
             for i in range(n)])


def test_master_urls_list_every_host_and_port():
    assert master_addresses("spark://a:7077,b:7078") == [("a", 7077), ("b", 7078)]
    assert master_addresses("spark://a") == [("a", 7077)]
    assert master_addresses("local[2]") == [] and master_addresses("yarn") == []


def test_a_listening_master_passes_the_check():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        check_master(f"spark://127.0.0.1:{unused_port()},127.0.0.1:{port}")  # one live master is enough


def test_every_unreachable_master_is_named():
    a, b = unused_port(), unused_port()
    with pytest.raises(MasterUnreachableError, match=rf"all masters are unresponsive \(spark://127.0.0.1:{a}: "
                                                     rf"connection refused; spark://127.0.0.1:{b}: connection refused"):
        check_master(f"spark://127.0.0.1:{a},127.0.0.1:{b}")


def test_unreachable_master_fails_fast_and_is_recorded_in_run_log(tmp_path, no_jvm):
    pipeline = homelab_copy(tmp_path)
    _seed(tmp_path)  # a run needs its ledger (a missing one is its own error)
    port = unused_port()
    t0 = time.monotonic()
    out = invoke("run", pipeline, "--master", f"spark://127.0.0.1:{port}")
    assert time.monotonic() - t0 < 10
    assert out.exit_code == 1
    assert f"spark master at spark://127.0.0.1:{port} is unreachable: connection refused" in out.output
    assert "INFO" not in out.output and "Traceback" not in out.output
    [run] = _runs(tmp_path)
    assert run["kind"] == "pipeline" and run["status"] == "failed"
    assert "connection refused" in run["error"] and run["details"]["master"] == f"spark://127.0.0.1:{port}"
    status = invoke("status", "--failed", "--source", tmp_path / "homelab.sqlite")
    assert run["run_id"] in status.output and "unreachable" in status.output


def test_check_with_an_unreachable_master_exits_1_before_the_jvm(tmp_path, no_jvm):
    pipeline = homelab_copy(tmp_path)
    _seed(tmp_path)
    out = invoke("check", pipeline, "--master", f"spark://127.0.0.1:{unused_port()}")
    assert out.exit_code == 1 and "is unreachable: connection refused" in out.output
    assert _runs(tmp_path) == []  # check commits nothing, not even a run


def test_spark_submit_that_cannot_launch_is_recorded_as_a_failed_run(tmp_path, monkeypatch):
    defn = load_pipeline(homelab_copy(tmp_path))
    _seed(tmp_path)
    monkeypatch.setattr(submit, "spark_submit", lambda: str(tmp_path / "no-such-spark-submit"))
    result = runner_module.run_pipeline(defn, stage="split_youtube", echo=lambda m: None)
    [outcome] = result.outcomes
    assert outcome.status == "failed" and "spark-submit did not launch" in outcome.error
    [run] = _runs(tmp_path)
    assert (run["stage"], run["status"], run["details"]["phase"]) == ("split_youtube", "failed", "launch")
    assert "No such file" in run["error"]


def test_a_job_failing_before_its_stage_runs_is_recorded_with_its_own_message(tmp_path, monkeypatch):
    defn = load_pipeline(homelab_copy(tmp_path))
    _seed(tmp_path)
    fake = tmp_path / "spark-submit"
    fake.write_text("#!/bin/sh\n"
                    "echo '26/01/01 10:00:00 INFO SparkContext: Running Spark version 3.5' >&2\n"
                    "echo 'minikafka: pipeline.toml: stages.split_youtube.job: cannot import job module' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(submit, "spark_submit", lambda: str(fake))
    result = runner_module.run_pipeline(defn, stage="split_youtube", echo=lambda m: None)
    assert result.outcomes[0].error == "pipeline.toml: stages.split_youtube.job: cannot import job module"
    [run] = _runs(tmp_path)
    assert run["status"] == "failed" and run["error"] == result.outcomes[0].error
    assert run["details"] == {"phase": "spark-submit", "exit_code": 1}


def test_a_dry_run_that_fails_to_launch_records_nothing(tmp_path, monkeypatch):
    defn = load_pipeline(homelab_copy(tmp_path))
    _seed(tmp_path)
    monkeypatch.setattr(submit, "spark_submit", lambda: str(tmp_path / "no-such-spark-submit"))
    result = runner_module.run_pipeline(defn, stage="split_youtube", dry_run=True, echo=lambda m: None)
    assert result.outcomes[0].status == "failed" and _runs(tmp_path) == []

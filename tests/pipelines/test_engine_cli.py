"""The warm engine through the real `minikafka` command: serve, run on an engine, nothing new."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from minikafka import Source
from minikafka.spark.engine import EngineState
from tests.pipelines.helpers import ROOT, generate, homelab_copy
from tests.util.ports import unused_port

pytestmark = pytest.mark.spark  # engines are JVMs (the no-JVM run skips these)

def engine_env() -> dict[str, str]:
    """The commands' environment: the engine mode auto, this test's engine directory (conftest)."""
    return {**os.environ, "MINIKAFKA_ENGINE": "auto"}


def mk(*args, env=None, timeout=600, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env or engine_env())


def engine_state() -> EngineState | None:
    """The one engine recorded in this test's engine directory (None when none is)."""
    from minikafka.spark.engines import recorded

    found = recorded()
    assert len(found) <= 1, found
    return found[0][1] if found else None


def ingested(tmp_path, items: int = 60):
    pipeline = homelab_copy(tmp_path)
    done = mk("ingest", pipeline, "rss.items", generate(tmp_path, items))
    assert done.returncode == 0, done.stderr
    return pipeline


def java_pids() -> set[int]:
    out = subprocess.run(["pgrep", "-f", "SparkConnectServer"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def test_serve_refuses_a_port_that_is_taken_in_one_line(tmp_path):
    pipeline = homelab_copy(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        before = java_pids()
        out = mk("serve", "--pipeline", pipeline, "--port", port)
    assert out.returncode == 1
    assert out.stderr.strip() == f"Error: port {port} on 127.0.0.1 is taken (Address already in use): give another with --port N"
    assert java_pids() <= before  # no JVM was started


def test_serve_stop_without_an_engine_says_so(tmp_path):
    out = mk("serve", "--stop", "--pipeline", homelab_copy(tmp_path))
    assert out.returncode == 0 and "no engine runs for pipeline homelab" in out.stderr
    out = mk("engine", "stop")
    assert out.returncode == 0 and "no engine runs" in out.stderr


def test_an_engine_that_does_not_answer_is_one_line_and_nothing_is_committed(tmp_path):
    pipeline = ingested(tmp_path, 20)
    url = f"sc://127.0.0.1:{unused_port()}"
    out = mk("run", pipeline, "--remote", url)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"Error: no engine answers at {url}" in out.stderr
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        assert src.runs(stage="split_youtube") == []


def test_nothing_new_returns_at_once_without_an_engine_or_a_jvm(tmp_path):
    pipeline = homelab_copy(tmp_path)
    assert mk("ingest", pipeline, "rss.items", tmp_path / "missing.jsonl").returncode != 0  # no ledger yet
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    mk("ingest", pipeline, "rss.items", empty)
    before = java_pids()
    out = mk("run", pipeline, "--engine", "connect", "--json")  # connect: it would fail if it needed an engine
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["nothing_to_do"] and [s["status"] for s in result["stages"]] == ["succeeded"] * 6
    assert java_pids() <= before
    assert engine_state() is None


@pytest.mark.spark
@pytest.mark.slow
def test_the_dag_on_the_shared_engine_side_by_side_equals_one_application(tmp_path, engine_url, spark):
    from minikafka.pipelines import load_pipeline
    from minikafka.pipelines.runner import run_pipeline
    from tests.pipelines.test_cluster import snapshot

    (tmp_path / "engine").mkdir()
    (tmp_path / "reference").mkdir()
    on_engine = ingested(tmp_path / "engine", 120)
    reference = homelab_copy(tmp_path / "reference")
    (tmp_path / "reference" / "homelab.sqlite").write_bytes((tmp_path / "engine" / "homelab.sqlite").read_bytes())
    out = mk("run", on_engine, "--remote", engine_url, "--max-parallel", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    ends = [line.split(":")[0].strip() for line in out.stderr.splitlines() if line.startswith("   ")]
    assert sorted(ends) == ["feed_day", "keep_articles", "llm_summary", "score", "split_youtube", "transcribe"]
    assert "total" in out.stdout and "ok" in out.stdout.splitlines()[-1]
    assert run_pipeline(load_pipeline(reference), in_process=True, echo=lambda m: None).ok
    assert snapshot(tmp_path / "engine" / "homelab.sqlite") == snapshot(tmp_path / "reference" / "homelab.sqlite")


@pytest.mark.spark
@pytest.mark.slow
def test_serve_is_ready_then_stops_by_itself_once_idle_and_leaves_no_jvm(tmp_path):
    pipeline = homelab_copy(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "serve", "--pipeline", str(pipeline), "--port", "0",
                             "--idle-timeout", "3"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=engine_env())
    try:
        ready = proc.stdout.readline()
        assert ready.startswith("engine ready at sc://127.0.0.1:"), ready + proc.stderr.read()
        state = engine_state()
        assert state is not None and state.pid == proc.pid and state.url in ready and state.alive()
        again = mk("serve", "--pipeline", pipeline, "--port", "0")
        assert again.returncode == 1 and "already runs at " + state.url in again.stderr, again.stderr
        assert proc.wait(timeout=120) == 0
        assert "stopped after 3 s unused" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    assert engine_state() is None
    deadline = time.time() + 10
    while state.jvm_pid in java_pids() and time.time() < deadline:
        time.sleep(0.2)
    assert state.jvm_pid not in java_pids()


@pytest.mark.spark
@pytest.mark.slow
def test_run_starts_its_own_engine_and_with_idle_timeout_zero_stops_it_at_the_end(tmp_path):
    pipeline = ingested(tmp_path, 40)
    out = mk("run", pipeline, "--stage", "keep_articles", "--idle-timeout", "0")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "starting an engine for homelab (stops at the end of this run)" in out.stderr
    assert "keep_articles          succeeded" in out.stdout
    assert engine_state() is None
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        (run,) = src.runs(stage="keep_articles")
        assert run["status"] == "succeeded" and run["rows_out"] > 0


def test_an_engine_url_token_reaches_neither_the_error_nor_the_run_log(tmp_path):
    from tests.connectors.test_secrets_never_leak import _forms, ledger_bytes

    pipeline = ingested(tmp_path, 5)
    token = "tok/9+XzQ=Lm4-engine"
    url = f"sc://127.0.0.1:{unused_port()}/;user_id=bob;token={token}"
    out = mk("run", pipeline, "--remote", url)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "no engine answers at sc://127.0.0.1:" in out.stderr and ";user_id=bob;token=***" in out.stderr
    stored = ledger_bytes(str(tmp_path / "homelab.sqlite"))
    assert ";token=***" in stored  # the failed run's row names the engine, masked
    for form in _forms(token):
        assert form not in out.stdout + out.stderr and form not in stored


def test_watch_on_the_engine_until_idle_gives_the_same_ledger_as_one_application(tmp_path, engine_url, spark):
    """`watch --remote` runs every stage as a client of the engine (no JVM of its own) and ends
    with the ledger a classic in-process run gives; a second watch finds nothing to do."""
    from minikafka.pipelines import load_pipeline
    from minikafka.pipelines.runner import run_pipeline
    from tests.pipelines.test_cluster import snapshot

    (tmp_path / "engine").mkdir()
    (tmp_path / "reference").mkdir()
    on_engine = ingested(tmp_path / "engine", 80)
    reference = homelab_copy(tmp_path / "reference")
    (tmp_path / "reference" / "homelab.sqlite").write_bytes((tmp_path / "engine" / "homelab.sqlite").read_bytes())
    before = java_pids()
    out = mk("watch", on_engine, "--remote", engine_url, "--until-idle", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads(out.stdout)
    assert sorted(o["stage"] for o in summary["outcomes"]) == [
        "feed_day", "keep_articles", "llm_summary", "score", "split_youtube", "transcribe"]
    assert java_pids() == before  # the engine it used is the only Spark server: it started none
    with Source(str(tmp_path / "engine" / "homelab.sqlite")) as source:  # every stage ran as the engine's client
        sessions = {json.loads(d)["session"] for (d,) in source.ledger.conn.execute(
            "SELECT details FROM _minikafka_runs WHERE kind = 'stage'")}
    assert sessions == {"connect"}
    assert run_pipeline(load_pipeline(reference), in_process=True, echo=lambda m: None).ok
    assert snapshot(tmp_path / "engine" / "homelab.sqlite") == snapshot(tmp_path / "reference" / "homelab.sqlite")
    again = mk("watch", on_engine, "--remote", engine_url, "--until-idle", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["outcomes"] == []


def test_serve_refuses_a_metrics_port_that_is_taken_in_one_line_before_any_jvm(tmp_path):
    pipeline = homelab_copy(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        before = java_pids()
        out = mk("serve", "--pipeline", pipeline, "--port", "0", "--metrics-port", port)
    assert out.returncode == 1
    assert out.stderr.strip() == (f"Error: metrics port {port} on 127.0.0.1 cannot be used (Address already in use): "
                                  "give another with --metrics-port N")
    assert java_pids() <= before


def _scrape(url: str) -> dict:
    """{(name, labels): value} of every sample at ``url``, read with Prometheus' own parser."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.mark.spark
@pytest.mark.slow
def test_serve_with_a_metrics_port_answers_prometheus_with_the_engine_and_its_pipelines_ledger(tmp_path):
    import urllib.error
    import urllib.request

    pipeline = ingested(tmp_path, 20)
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "serve", "--pipeline", str(pipeline), "--port", "0",
                             "--metrics-port", "0", "--idle-timeout", "300", "--no-warm-up"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=engine_env())
    try:
        ready = proc.stdout.readline()
        assert "metrics at http://127.0.0.1:" in ready, ready + proc.stderr.read()
        url = ready.split("metrics at ")[1].split(")")[0]
        state = engine_state()
        master = (("master", "local[2]"),)
        before = _scrape(url)
        assert before[("minikafka_engine_up", master)] == 1
        assert before[("minikafka_engine_start_timestamp_seconds", master)] == pytest.approx(state.started_at, abs=1)
        assert before[("minikafka_engine_pipelines", master)] == 0
        assert before[("minikafka_engine_jvm_resident_memory_bytes", master)] > 100 << 20
        assert 0 < before[("minikafka_engine_stops_in_seconds", master)] <= 300
        # the ledger's part is what 'minikafka metrics --pipeline' prints
        printed = mk("metrics", "--pipeline", pipeline)
        assert printed.returncode == 0, printed.stderr
        from prometheus_client.parser import text_string_to_metric_families

        cli = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(printed.stdout) for s in f.samples}
        ledger_part = {k: v for k, v in before.items() if not k[0].startswith("minikafka_engine_")}
        assert ledger_part.keys() == cli.keys()
        assert ledger_part[("minikafka_topic_rows", (("topic", "rss.items"),))] == cli[
            ("minikafka_topic_rows", (("topic", "rss.items"),))] > 0

        out = mk("run", pipeline, "--remote", state.url, "--stage", "keep_articles")
        assert out.returncode == 0, out.stderr
        after = _scrape(url)
        stage = (("pipeline", "homelab"), ("stage", "keep_articles"))
        assert after[("minikafka_engine_pipelines", master)] == 1
        assert after[("minikafka_stage_last_success_timestamp_seconds", stage)] > 0
        with Source(str(tmp_path / "homelab.sqlite")) as src:
            last = src.runs(stage="keep_articles")[0]
        assert last["status"] == "succeeded" and after[("minikafka_stage_last_run_out_rows", stage)] == last["rows_out"]
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=30)
        assert missing.value.code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert engine_state() is None

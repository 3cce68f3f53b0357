"""`run` on an engine forks its stages from one pre-imported stage host (pipelines/launch/stagehost.py):
the same ledger as fresh processes, nothing left running after Ctrl-C or a kill, a host that
dies means fresh processes, and MINIKAFKA_STAGE_HOST=0 turns it off.

Where a stage need not talk to Spark, its job is a probe (below) and the "engine" is a socket
this test listens on (``run`` only asks that something answers at the URL): no JVM."""

from __future__ import annotations

import json
import os
import signal
import socket
import textwrap
import uuid
from pathlib import Path

import pytest

from minikafka import Source
from tests.cli.helpers import invoke
from tests.cli.test_interrupts import mk, wait_for
from tests.pipelines.helpers import generate, homelab_copy
from tests.util.procscan import marked_pids

PROBE = textwrap.dedent("""
    import json, os, sys, time
    PRELOADED = "pyspark.sql.connect.session" in sys.modules  # imported by the host before this file ran
    from jobs.keep_articles import transform  # noqa: F401  (the stage's own transform)
    from minikafka.job import main

    VERSION = 1

    if __name__ == "__main__":
        with open(os.environ["PROBE_LOG"], "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "preloaded": PRELOADED,
                                 "version": VERSION}) + "\\n")
        while os.environ.get("PROBE_WAIT") and not os.path.exists(os.environ["PROBE_WAIT"]):
            time.sleep(0.05)
        if os.environ.get("PROBE_FAKE"):  # no Spark: the run record the job would print
            run_id = sys.argv[sys.argv.index("--run-id") + 1]
            print(json.dumps({"run_id": run_id, "stage": "keep_articles", "status": "succeeded"}))
            raise SystemExit(0)
        raise SystemExit(main())
""")


@pytest.fixture
def probed(tmp_path):
    """The example pipeline with keep_articles's job replaced by the probe, 30 items ingested."""
    (tmp_path / "probejobs").mkdir()
    (tmp_path / "probejobs" / "__init__.py").write_text("")
    (tmp_path / "probejobs" / "keep_probe.py").write_text(PROBE)
    pipeline = homelab_copy(tmp_path, replace={'job = "jobs.keep_articles"': 'job = "probejobs.keep_probe"'})
    assert invoke("ingest", pipeline, "rss.items", generate(tmp_path, 30)).exit_code == 0
    return pipeline


@pytest.fixture
def fake_engine():
    """A URL where something answers (the probe never talks to it)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"sc://127.0.0.1:{listener.getsockname()[1]}"


def probes(tmp_path: Path) -> list[dict]:
    log = tmp_path / "probe.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def marked(marker: str) -> list[int]:
    """Live processes started with STAGE_HOST_MARKER=marker (the runner, its host, the stages)."""
    return marked_pids("STAGE_HOST_MARKER", marker)


def run_probe(tmp_path, pipeline, url, *args, **env):
    marker = uuid.uuid4().hex
    proc = mk("run", pipeline, "--remote", url, *args, cwd=tmp_path,
              env={"PROBE_LOG": str(tmp_path / "probe.log"), "STAGE_HOST_MARKER": marker,
                   "MINIKAFKA_ENGINE": "connect", **env})
    return proc, marker


def test_a_stage_runs_in_a_child_of_the_preloaded_host_and_with_the_host_off_in_a_fresh_process(
        tmp_path, probed, fake_engine):
    proc, _ = run_probe(tmp_path, probed, fake_engine, "--stage", "keep_articles", PROBE_FAKE="1")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    off, _ = run_probe(tmp_path, probed, fake_engine, "--stage", "keep_articles", PROBE_FAKE="1",
                       MINIKAFKA_STAGE_HOST="0")
    out, err = off.communicate(timeout=120)
    assert off.returncode == 0, err
    hosted, fresh = probes(tmp_path)
    assert hosted["preloaded"] and hosted["ppid"] != proc.pid  # forked from the host
    assert not fresh["preloaded"] and fresh["ppid"] == off.pid  # MINIKAFKA_STAGE_HOST=0: the runner's own child


def test_a_job_file_edited_between_two_runs_runs_as_edited(tmp_path, probed, fake_engine):
    for version in (1, 2):
        job = tmp_path / "probejobs" / "keep_probe.py"
        job.write_text(PROBE.replace("VERSION = 1", f"VERSION = {version}"))
        proc, _ = run_probe(tmp_path, probed, fake_engine, "--stage", "keep_articles", PROBE_FAKE="1")
        assert proc.communicate(timeout=120) and proc.returncode == 0
    assert [p["version"] for p in probes(tmp_path)] == [1, 2]


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sigkill"])
def test_a_runner_stopped_while_a_hosted_stage_runs_leaves_no_process(tmp_path, probed, fake_engine, how):
    proc, marker = run_probe(tmp_path, probed, fake_engine, "--stage", "keep_articles",
                             PROBE_WAIT=str(tmp_path / "never"))
    assert wait_for(lambda: probes(tmp_path), timeout=120)
    (stage,) = probes(tmp_path)
    host = stage["ppid"]
    assert {proc.pid, host, stage["pid"]} <= set(marked(marker))
    proc.send_signal({"ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}[how])
    _, err = proc.communicate(timeout=120)
    assert wait_for(lambda: marked(marker) == [], timeout=30), marked(marker)
    if how == "ctrl-c":
        assert proc.returncode == 130, err
        with Source(str(tmp_path / "homelab.sqlite")) as src:
            (run,) = src.runs(stage="keep_articles")
            assert run["status"] == "interrupted" and run["rows_out"] == 0


@pytest.mark.spark
@pytest.mark.slow
def test_a_host_killed_mid_stage_falls_back_to_fresh_processes_and_the_run_succeeds(
        tmp_path, probed, engine_url):
    go = tmp_path / "go"
    proc, _ = run_probe(tmp_path, probed, engine_url, "--from", "keep_articles", PROBE_WAIT=str(go))
    assert wait_for(lambda: probes(tmp_path), timeout=120)
    os.kill(probes(tmp_path)[0]["ppid"], signal.SIGKILL)  # the host; the stage dies with it
    go.touch()
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    first, again = probes(tmp_path)
    assert first["preloaded"] and not again["preloaded"] and again["ppid"] == proc.pid
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        assert [r["status"] for r in src.runs(stage="keep_articles")] == ["succeeded"]
        assert {r["status"] for r in src.runs(stage="score")} == {"succeeded"}


@pytest.mark.spark
@pytest.mark.slow
def test_the_dag_through_the_stage_host_leaves_the_ledger_of_fresh_processes(tmp_path, engine_url):
    from tests.pipelines.test_cluster import snapshot

    ledgers = []
    for host in ("1", "0"):
        home = tmp_path / f"host-{host}"
        home.mkdir()
        pipeline = homelab_copy(home)
        assert invoke("ingest", pipeline, "rss.items", generate(home, 80)).exit_code == 0
        proc = mk("run", pipeline, "--remote", engine_url, env={"MINIKAFKA_STAGE_HOST": host, "MINIKAFKA_ENGINE": "connect"})
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, out + err
        ledgers.append(snapshot(home / "homelab.sqlite"))
    assert ledgers[0] == ledgers[1] and ledgers[0]["rss.scored"]

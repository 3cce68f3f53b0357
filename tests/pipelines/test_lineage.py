"""OpenLineage events of pipeline runs: valid against the spec's own JSON schemas, naming the
DAG's datasets, sent to a file and a real HTTP endpoint, and a FAIL for a run whose process
was SIGKILLed, sent by the next run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.errors import PipelineDefinitionError
from minikafka.ledger.consuming import lineage_log
from minikafka.ledger.consuming.runlog import INTERRUPTED, TERMINATED, gone_error
from minikafka.observe.lineage import KILLED, Dataset, StageJob, end_event
from minikafka.pipelines import load_pipeline
from minikafka.pipelines.opening import open_source
from minikafka.pipelines.runner import run_pipeline
from minikafka.util.faults import ENV
from minikafka.util.liveness import this_process
from tests.pipelines.helpers import ROOT, generate, homelab_copy
from tests.util.ports import unused_port

SPEC_DIR = ROOT / "tests" / "data" / "openlineage"


def validator():
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    resources = []
    for path in SPEC_DIR.glob("*.json"):
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    registry = Registry().with_resources(resources)
    spec = json.loads((SPEC_DIR / "OpenLineage.json").read_text())
    return Draft202012Validator({"$ref": spec["$id"] + "#/$defs/RunEvent"}, registry=registry,
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def check_events(events: list[dict]) -> None:
    """Every event valid, and every facet valid against its own schema (the spec's RunEvent
    accepts any object as a facet: each facet's schema is what says it is well formed)."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    check = validator()
    schemas = {json.loads(p.read_text())["$id"]: json.loads(p.read_text()) for p in SPEC_DIR.glob("*.json")}
    registry = Registry().with_resources([(k, Resource.from_contents(v)) for k, v in schemas.items()])
    for event in events:
        errors = sorted(check.iter_errors(event), key=str)
        assert not errors, (event["eventType"], [e.message for e in errors])
        facets = [*event["run"].get("facets", {}).values(), *event["job"].get("facets", {}).values()]
        for ds in (*event.get("inputs", []), *event.get("outputs", [])):
            for group in ("facets", "inputFacets", "outputFacets"):
                facets += list(ds.get(group, {}).values())
        for facet in facets:
            url = facet["_schemaURL"]
            base, _, pointer = url.partition("#")
            assert base in schemas, url
            facet_check = Draft202012Validator({"$ref": url}, registry=registry)
            assert not list(facet_check.iter_errors(facet)), (url, [e.message for e in facet_check.iter_errors(facet)])


def lineage_project(tmp_path: Path, extra: str = "") -> Path:
    return homelab_copy(tmp_path, extra=f'\n[lineage]\nnamespace = "homelab-test"\nfile = "{tmp_path / "events.jsonl"}"\n'
                        + extra)


def read_events(tmp_path: Path) -> list[dict]:
    path = tmp_path / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def by_run(events: list[dict]) -> dict[str, list[str]]:
    runs: dict[str, list[str]] = {}
    for e in events:
        runs.setdefault(e["run"]["runId"], []).append(e["eventType"])
    return runs


def dag_datasets(defn) -> dict[str, tuple[list[str], list[str]]]:
    return {f"{defn.name}.{sd.name}": (sorted(sd.inputs), sorted(sd.outputs)) for sd in defn.stages}


def test_every_event_of_a_run_is_valid_and_names_the_dags_topics(tmp_path):
    defn = load_pipeline(lineage_project(tmp_path))
    with open_source(defn):
        pass
    result = run_pipeline(defn, in_process=True, echo=lambda m: None)  # nothing new: no JVM
    assert result.ok
    events = read_events(tmp_path)
    check_events(events)
    assert {r: tuple(v) for r, v in by_run(events).items()} == {r: ("START", "COMPLETE") for r in by_run(events)}
    assert len(by_run(events)) == len(defn.stages)
    seen = {e["job"]["name"]: (sorted(d["name"] for d in e["inputs"]), sorted(d["name"] for d in e["outputs"]))
            for e in events}
    assert seen == dag_datasets(defn)
    assert {e["job"]["namespace"] for e in events} == {"homelab-test"}
    assert {d["namespace"] for e in events for d in e["inputs"] + e["outputs"]} == {f"sqlite:{defn.source}"}
    for e in events:
        uuid.UUID(e["run"]["runId"])
        fields = {d["name"]: [f["name"] for f in d["facets"]["schema"]["fields"]] for d in e["outputs"]}
        assert all(fields.values()), fields


def test_a_dry_run_sends_no_event(tmp_path):
    defn = load_pipeline(lineage_project(tmp_path))
    with open_source(defn):
        pass
    run_pipeline(defn, in_process=True, dry_run=True, echo=lambda m: None)
    assert read_events(tmp_path) == []


def test_a_runner_sigkilled_after_a_start_gets_its_fail_from_the_next_run(tmp_path):
    path = lineage_project(tmp_path)
    defn = load_pipeline(path)
    with open_source(defn):
        pass
    env = {**os.environ, ENV: "lineage:started", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "run", "--pipeline", str(path), "--in-process"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:
            if "FROZEN lineage:started" in line:
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    killed = read_events(tmp_path)
    assert [e["eventType"] for e in killed] == ["START"]

    lines: list[str] = []
    assert run_pipeline(defn, in_process=True, echo=lines.append).ok
    events = read_events(tmp_path)
    check_events(events)
    first = killed[0]["run"]["runId"]
    assert by_run(events)[first] == ["START", "FAIL"]
    fail = next(e for e in events if e["run"]["runId"] == first and e["eventType"] == "FAIL")
    assert fail["run"]["facets"]["errorMessage"]["message"] == KILLED
    assert fail["job"]["name"] == killed[0]["job"]["name"]
    assert any("earlier run" in line for line in lines)
    # every run now has exactly one ending; a third run sends nothing more for the killed one
    assert all(v[0] == "START" and len(v) == 2 for v in by_run(events).values())
    run_pipeline(defn, in_process=True, echo=lambda m: None)
    assert by_run(read_events(tmp_path))[first] == ["START", "FAIL"]


def test_a_start_sent_by_a_process_still_running_is_left_open(tmp_path):
    defn = load_pipeline(lineage_project(tmp_path))
    with open_source(defn) as source:
        with source.ledger.atomic() as conn:
            lineage_log.note_start_in_current_transaction(conn, lineage_log.OpenRun(
                "split_youtube-live", defn.name, "split_youtube", "2026-11-28T00:00:00Z", this_process()))
            reused = {**this_process(), "start": "1@" + this_process()["start"].split("@", 1)[1]}
            lineage_log.note_start_in_current_transaction(conn, lineage_log.OpenRun(  # this pid, another start time
                "split_youtube-reused-pid", defn.name, "split_youtube", "2026-11-28T00:00:01Z", reused))
    run_pipeline(defn, in_process=True, echo=lambda m: None)
    with Source(str(defn.source)) as src:
        assert lineage_log.ending_of(src.ledger.conn, "split_youtube-live") is None
        assert lineage_log.ending_of(src.ledger.conn, "split_youtube-reused-pid") == "FAIL"


class Collector(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Collector.received.append((self.path, dict(self.headers), json.loads(body)))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args):  # quiet
        pass


def test_events_are_posted_with_the_bearer_token_which_is_never_written_anywhere(tmp_path, monkeypatch):
    token = "tok-" + uuid.uuid4().hex
    monkeypatch.setenv("LINEAGE_TEST_TOKEN", token)
    Collector.received = []
    server = HTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/api/v1/lineage"
        defn = load_pipeline(lineage_project(tmp_path, f'url = "{url}"\napi_key_env = "LINEAGE_TEST_TOKEN"\n'))
        with open_source(defn):
            pass
        lines: list[str] = []
        assert run_pipeline(defn, in_process=True, echo=lines.append).ok
    finally:
        server.shutdown()
    assert len(Collector.received) == 2 * len(defn.stages)
    assert {p for p, _, _ in Collector.received} == {"/api/v1/lineage"}
    assert {h["Authorization"] for _, h, _ in Collector.received} == {f"Bearer {token}"}
    assert [e for _, _, e in Collector.received] == read_events(tmp_path)  # the file got the same events
    written = (tmp_path / "events.jsonl").read_bytes() + Path(defn.source).read_bytes() + "\n".join(lines).encode()
    assert token.encode() not in written


def test_an_endpoint_that_does_not_answer_costs_a_warning_line_not_the_run(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    defn = load_pipeline(lineage_project(tmp_path, f'url = "http://user:hunter2secret@127.0.0.1:{port}/x"\ntimeout = 2\n'))
    with open_source(defn):
        pass
    lines: list[str] = []
    assert run_pipeline(defn, in_process=True, echo=lines.append).ok
    warnings = [line for line in lines if line.startswith("lineage: could not send")]
    assert len(warnings) == 2 * len(defn.stages)
    assert not any("hunter2secret" in line for line in lines)


@pytest.mark.parametrize("table, problem", [
    ('namespace = "x"\n', "give file"),
    ('url = "ftp://host/x"\n', "lineage.url"),
    ('file = "e.jsonl"\ntimeout = 0\n', "lineage.timeout"),
    ('file = "e.jsonl"\napi_key_env = "NOT A NAME"\n', "lineage.api_key_env"),
    ('file = "e.jsonl"\nbogus = 1\n', "lineage: unknown key 'bogus'"),
    ('transport = "kafka"\n', "lineage.transport: 'kafka' is not one of openlineage"),
])
def test_a_bad_lineage_table_is_an_error_naming_the_key(tmp_path, table, problem):
    path = homelab_copy(tmp_path, extra="\n[lineage]\n" + table)
    with pytest.raises(PipelineDefinitionError, match=problem.replace(".", r"\.")):
        load_pipeline(path)


def test_a_failed_runs_error_is_masked_in_its_fail_event():
    job = StageJob("ns", "p", "s", "/l.sqlite", "id", (Dataset("a", (("x", "int"),)),), (Dataset("b"),))
    event = end_event(job, "s-1", "2026-11-28T00:00:00Z",
                      {"status": "failed", "error": "could not open https://bob:s3cretpw@host/x?token=abcdef123456"})
    check_events([event])
    message = event["run"]["facets"]["errorMessage"]["message"]
    assert "s3cretpw" not in message and "abcdef123456" not in message
    assert event["eventType"] == "FAIL"



@pytest.mark.parametrize(("error", "ending"), [
    (INTERRUPTED, "ABORT"),
    (TERMINATED, "ABORT"),
    ("the stage's process was killed by SIGKILL (the OOM killer, kill -9)", "FAIL"),
    (gone_error({"pid": 4242, "host": "box"}), "FAIL"),
    (None, "FAIL"),
])
def test_a_run_stopped_on_purpose_is_an_abort_and_one_that_died_is_a_fail(error, ending):
    job = StageJob("ns", "p", "s", "/l.sqlite", "id", (Dataset("a"),), (Dataset("b"),))
    event = end_event(job, "s-1", "2026-11-28T00:00:00Z", {"status": "interrupted", "error": error})
    check_events([event])
    assert event["eventType"] == ending
    assert event["run"]["facets"]["errorMessage"]["message"] == (error or KILLED)


def test_a_launched_stage_process_sigkilled_while_the_runner_lives_gets_a_fail(tmp_path):
    from minikafka.pipelines.launch.child import Children, run_child
    from minikafka.pipelines.lineage import Lineage
    from tests.pipelines.test_killed_runs import PIPELINE, seed, stored_runs

    (tmp_path / "data").mkdir()
    night = tmp_path / "night.toml"
    night.write_text(PIPELINE + f'\n[lineage]\nfile = "{tmp_path / "events.jsonl"}"\n')
    seed(night)
    defn = load_pipeline(night, check_jobs=False, suites=False)
    sd = defn.stage("copy")
    run_id = "copy-launched"
    procs, outcomes = Children(), []
    env = {**os.environ, ENV: "stage:started", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests.pipelines.killed_child", str(night), "copy", run_id]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with open_source(defn) as source:
            lineage = Lineage.of(defn, source, echo=lambda m: None)
            lineage.started(sd, run_id)  # as the runner does before it launches the stage
            runner = threading.Thread(target=lambda: outcomes.append(
                run_child(defn, sd, cmd, run_id, False, lambda *_: None, procs, False, None, env=env)))
            runner.start()
            deadline = time.monotonic() + 60
            while not any(r["run_id"] == run_id for r in stored_runs(night)) or "copy" not in procs.running:
                assert time.monotonic() < deadline, "the stage never wrote its running row"
                time.sleep(0.05)
            os.kill(procs.running["copy"].pid, signal.SIGKILL)  # the OOM killer picks the stage's process
            runner.join(60)
            lineage.ended(sd, run_id, outcomes[0])  # as the runner does once the stage is over
    finally:
        os.chdir(cwd)
    assert next(r for r in stored_runs(night) if r["run_id"] == run_id)["status"] == "interrupted"
    events = read_events(tmp_path)
    check_events(events)
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    assert "killed by SIGKILL" in events[1]["run"]["facets"]["errorMessage"]["message"]


@pytest.mark.spark
def test_the_example_pipelines_events_carry_row_counts_and_quality_assertions(spark, tmp_path):
    from minikafka.connectors.ingest import ingest_jsonl

    defn = load_pipeline(lineage_project(tmp_path))
    with open_source(defn) as src:
        ingest_jsonl(src._topics["rss.items"], generate(tmp_path, 120))
    result = run_pipeline(defn, in_process=True, echo=lambda m: None)
    assert result.ok, result.table()
    events = read_events(tmp_path)
    check_events(events)
    assert {e["job"]["name"]: (sorted(d["name"] for d in e["inputs"]), sorted(d["name"] for d in e["outputs"]))
            for e in events} == dag_datasets(defn)
    rows_out = {f"{defn.name}.{o.name}": o.run["rows_out"] for o in result.outcomes}
    for e in events:
        if e["eventType"] == "COMPLETE" and len(e["outputs"]) == 1:
            assert e["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == rows_out[e["job"]["name"]]
    checked = [e for e in events if any("dataQualityAssertions" in d["facets"] for d in e["outputs"])]
    suites = [sd for sd in defn.stages if sd.expectations]
    assert len(checked) == len(suites) and suites


@pytest.mark.spark
def test_every_stage_run_of_watch_sends_a_start_and_its_ending(spark, tmp_path):
    from minikafka.connectors.ingest import ingest_jsonl
    from minikafka.pipelines.watch import Watch

    defn = load_pipeline(lineage_project(tmp_path))
    with open_source(defn) as src:
        ingest_jsonl(src._topics["rss.items"], generate(tmp_path, 60))
    result = Watch(defn, spark=spark, until_idle=True, echo=lambda m: None).run()
    assert result.ok and result.outcomes
    events = read_events(tmp_path)
    check_events(events)
    runs = by_run(events)
    assert len(runs) == len(result.outcomes)
    assert all(kinds == ["START", "COMPLETE"] for kinds in runs.values()), runs
    seen = {e["job"]["name"]: (sorted(d["name"] for d in e["inputs"]), sorted(d["name"] for d in e["outputs"]))
            for e in events}
    assert seen == {k: v for k, v in dag_datasets(defn).items() if k in seen}
    assert {e["job"]["name"] for e in events} == {f"{defn.name}.{o.name}" for o in result.outcomes}
    with Source(str(defn.source)) as source:
        assert lineage_log.open_runs(source.ledger.conn, defn.name) == []


def test_pruning_the_run_log_prunes_the_lineage_notes_of_the_runs_it_deletes(tmp_path):
    from datetime import timedelta

    from click.testing import CliRunner

    from minikafka.cli import main
    from minikafka.util.clock import ManualClock, now, use_clock

    defn = load_pipeline(lineage_project(tmp_path))
    with open_source(defn):
        pass
    clock = ManualClock(now() - timedelta(days=10))
    with use_clock(clock):
        assert run_pipeline(defn, in_process=True, echo=lambda m: None).ok  # nothing new: no JVM
        clock.advance(3600)
        assert run_pipeline(defn, in_process=True, echo=lambda m: None).ok
    with Source(str(defn.source)) as source:
        conn = source.ledger.conn
        with source.ledger.atomic() as tx:  # a START whose ending was never sent stays until one is
            lineage_log.note_start_in_current_transaction(tx, lineage_log.OpenRun(
                "gone-run", defn.name, defn.stages[0].name, "2000-01-01T00:00:00.000000Z", this_process()))
        noted = {r[0] for r in conn.execute("SELECT run_id FROM _minikafka_lineage")}
    assert len(noted) == 2 * len(defn.stages) + 1

    pruned = CliRunner().invoke(main, ["prune", "--runs-older-than", "1d", "--source", str(defn.source)])
    assert pruned.exit_code == 0, pruned.output
    with Source(str(defn.source)) as source:
        conn = source.ledger.conn
        runs = {r[0] for r in conn.execute("SELECT run_id FROM _minikafka_runs WHERE kind = 'stage'")}
        left = {r[0] for r in conn.execute("SELECT run_id FROM _minikafka_lineage")}
    assert len(runs) == len(defn.stages)  # each stage's latest run
    assert left == runs | {"gone-run"}


@pytest.mark.parametrize(("field", "bad"), [("eventTime", "yesterday at noon"), ("eventTime", "2026-11-28 25:00"),
                                            ("producer", "not a uri"), ("schemaURL", "::")])
def test_the_schema_check_rejects_an_event_with_a_bad_time_or_uri(field, bad):
    job = StageJob("ns", "p", "s", "/l.sqlite", "id", (Dataset("a"),), (Dataset("b"),))
    event = end_event(job, "s-1", "2026-11-28T00:00:00Z", {"status": "succeeded"})
    check_events([event])
    assert not list(validator().iter_errors(event))
    errors = list(validator().iter_errors({**event, field: bad}))
    assert errors, f"{field}={bad!r} passed the schema check: are rfc3339-validator and rfc3986-validator installed?"
    assert any(e.validator == "format" for e in errors), [e.message for e in errors]


def test_the_lake_tables_a_stage_writes_are_outputs_of_its_events_named_by_their_location(tmp_path):
    pytest.importorskip("pyiceberg")
    lake = '\n[lake.scored]\nformat = "iceberg"\ntopic = "rss.scored"\nlocation = "lake/scored"\npartition_by = ["day(published)"]\n'
    defn = load_pipeline(lineage_project(tmp_path, extra=lake))
    with open_source(defn):
        pass
    assert run_pipeline(defn, in_process=True, echo=lambda m: None).ok  # nothing new: no JVM
    events = read_events(tmp_path)
    check_events(events)
    score = [e for e in events if e["job"]["name"] == "homelab.score"]
    assert [e["eventType"] for e in score] == ["START", "COMPLETE"]
    for e in score:
        named = sorted((d["namespace"], d["name"]) for d in e["outputs"])
        assert named == sorted([(f"sqlite:{defn.source}", "rss.scored"), ("file", str(tmp_path / "lake" / "scored"))])
        fields = {d["name"]: [f["name"] for f in d["facets"]["schema"]["fields"]] for d in e["outputs"]}
        assert fields[str(tmp_path / "lake" / "scored")] == fields["rss.scored"]
    others = [e for e in events if e["job"]["name"] != "homelab.score"]
    assert all(d["namespace"] != "file" for e in others for d in e["outputs"])


def test_location_datasets_follow_openlineages_naming_of_files_and_object_stores():
    from minikafka.observe.lineage import location_dataset

    assert (location_dataset("/srv/lake/scored").namespace, location_dataset("/srv/lake/scored").name) == (
        "file", "/srv/lake/scored")
    assert (location_dataset("file:///srv/lake/x").namespace, location_dataset("file:///srv/lake/x").name) == (
        "file", "/srv/lake/x")
    s3 = location_dataset("s3://bucket/warehouse/scored")
    assert (s3.namespace, s3.name) == ("s3://bucket", "warehouse/scored")


def test_transport_openlineage_hands_every_event_to_openlineage_pythons_configured_transport(tmp_path, monkeypatch):
    pytest.importorskip("openlineage.client")
    from minikafka.pipelines import lineage as sender

    monkeypatch.setattr(sender, "_CLIENT", [])  # a client made from this test's configuration
    out = tmp_path / "ol-events.jsonl"
    for key in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "file")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__LOG_FILE_PATH", str(out))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__APPEND", "true")
    path = homelab_copy(tmp_path, extra='\n[lineage]\nnamespace = "homelab-test"\ntransport = "openlineage"\n')
    defn = load_pipeline(path)
    with open_source(defn):
        pass
    assert run_pipeline(defn, in_process=True, echo=lambda m: None).ok  # nothing new: no JVM
    events = [json.loads(line) for line in out.read_text().splitlines()]
    check_events(events)
    assert len(events) == 2 * len(defn.stages)
    seen = {e["job"]["name"]: (sorted(d["name"] for d in e["inputs"]), sorted(d["name"] for d in e["outputs"]))
            for e in events}
    assert seen == dag_datasets(defn)


def test_transport_openlineage_to_an_endpoint_that_does_not_answer_costs_a_warning_line_and_never_shows_its_key(tmp_path, monkeypatch):
    pytest.importorskip("openlineage.client")
    from minikafka.pipelines import lineage as sender

    monkeypatch.setattr(sender, "_CLIENT", [])
    for key in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "http")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__URL", f"http://127.0.0.1:{unused_port()}")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__AUTH__TYPE", "api_key")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__AUTH__APIKEY", "ol-secret-key-123")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__RETRY", '{"total": 0, "connect": 0, "read": 0}')  # its default retries 5x
    monkeypatch.chdir(tmp_path)
    path = homelab_copy(tmp_path, extra='\n[lineage]\ntransport = "openlineage"\n')
    defn = load_pipeline(path)
    with open_source(defn):
        pass
    said: list[str] = []
    assert run_pipeline(defn, in_process=True, echo=said.append).ok
    warnings = [line for line in said if line.startswith("lineage: openlineage-python could not send")]
    assert warnings and all("ol-secret-key-123" not in line for line in said)

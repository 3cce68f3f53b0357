"""The Prometheus exposition (``minikafka metrics``, ``--textfile``, the console's ``/metrics``): read
with prometheus_client's own parser, every figure equal to what the ledger holds."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from minikafka import Source
from minikafka.cli import main
from minikafka.ledger.consuming import (
    Quarantined,
    RunResult,
    consumer_info,
    quarantine_in_current_transaction,
    read_runs,
    write_run_in_current_transaction,
)
from minikafka.ledger.files import backup
from minikafka.ledger.transactions import Ledger
from minikafka.observe.prometheus import FAMILIES
from minikafka.observe.scrape import TEXTFILE_NAME, PipelineScope, exposition
from minikafka.util.clock import format_timestamp, parse_timestamp
from tests.console.conftest import Console

parser = pytest.importorskip("prometheus_client.parser")

T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
SECRET = "hunter2-s3cret"
TOKEN = "metrics-token-0123456789"


class Reading(BaseModel):
    sensor: str
    value: float


def _run(ledger: Path, stage: str, status: str, started: datetime, error: str | None = None, **counts) -> RunResult:
    run = RunResult(f"{stage}-{started:%H%M%S}-{status}", "stage", stage=stage, status=status, error=error,
                    started_at=format_timestamp(started), finished_at=format_timestamp(started + timedelta(minutes=1)),
                    duration_s=60.0, **counts)
    led = Ledger(str(ledger))
    with led.atomic() as conn:
        write_run_in_current_transaction(conn, run)
    led.close()
    return run


@pytest.fixture
def ledger(tmp_path) -> Path:
    """A ledger after a good run, a failed run (its error quoting a secret), an interrupted run, a
    quarantine, a dead job in a work queue, and a backup."""
    path = tmp_path / "site" / "data" / "metrics.sqlite"
    path.parent.mkdir(parents=True)
    with Source(str(path)) as source:
        readings = source.topic("readings", Reading, dedup=None)
        readings.extend([{"sensor": f"s{i % 3}", "value": float(i)} for i in range(7)])
        readings.consumer("averages")
        queue = readings.queue("alerts", max_attempts=1)
        job = queue.claim_one("worker-1")
        job.fail(f"POST https://bot:{SECRET}@example.com/hook refused")
    _run(path, "average", "succeeded", T0, rows_in=7, rows_out=3, rows_duplicate=1)
    _run(path, "average", "failed", T0 + timedelta(hours=1),
         error=f"connect to postgres://app:{SECRET}@db/prod failed", rows_in=2, rows_out=1, rows_duplicate=1,
         rows_failed=1)
    _run(path, "notify", "interrupted", T0 + timedelta(hours=2), error="stopped by SIGTERM", rows_in=4,
         rows_quarantined=2)
    led = Ledger(str(path))
    with led.atomic() as conn:
        quarantine_in_current_transaction(conn, [
            Quarantined("readings", '{"sensor": "s9"}', "value must be positive", "quality", format_timestamp(T0),
                        consumer="average", run_id="average-000000-succeeded", row_id=None),
            Quarantined("readings", '{"sensor": "s8"}', "value must be positive", "quality", format_timestamp(T0),
                        consumer="average", run_id="average-000000-succeeded", row_id=None)])
    led.close()
    backup(str(path), str(path.parent.parent / "backups"))
    return path


def _exposed(family) -> str:
    """The name a family is exposed under (the parser drops a counter's ``_total``)."""
    return family.name + "_total" if family.type == "counter" else family.name


def _families(text: str) -> dict:
    return {_exposed(f): f for f in parser.text_string_to_metric_families(text)}


def _value(families, name: str, **labels) -> float:
    found = [s.value for s in families[name].samples
             if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, families[name].samples)
    return found[0]


def _epoch(text: str) -> float:
    return parse_timestamp(text).timestamp()


def check_equals_ledger(text: str, ledger: Path, pipeline: str = "") -> None:
    """Every figure of ``text`` is what the ledger holds, read through other paths than the exposition's."""
    fams = _families(text)
    assert _value(fams, "minikafka_ledger_file_bytes") == ledger.stat().st_size  # before anything writes
    wal = ledger.with_name(ledger.name + "-wal")
    assert _value(fams, "minikafka_ledger_wal_bytes") == (wal.stat().st_size if wal.exists() else 0)
    led = Ledger(str(ledger), read_only=True)
    runs = read_runs(led.conn, limit=100)
    newest = led.conn.execute('SELECT "_id", "_created_at" FROM "readings" ORDER BY "_id" DESC LIMIT 1').fetchone()
    led.close()
    for name in ("average", "notify"):
        for status in ("succeeded", "failed", "partial", "interrupted"):
            stored = sum(1 for r in runs if r["stage"] == name and r["kind"] == "stage" and r["status"] == status)
            labels = {"pipeline": pipeline if name == "average" else "", "stage": name, "status": status}
            assert _value(fams, "minikafka_stage_runs_total", **labels) == stored
    assert _value(fams, "minikafka_stage_runs_total", stage="average", status="failed") == 1
    stage = {"pipeline": pipeline, "stage": "average"}
    good = next(r for r in runs if r["stage"] == "average" and r["status"] == "succeeded")
    failed = next(r for r in runs if r["stage"] == "average" and r["status"] == "failed")
    interrupted = next(r for r in runs if r["stage"] == "notify")
    assert _value(fams, "minikafka_stage_last_run_status", **stage, status="failed") == 1
    assert _value(fams, "minikafka_stage_last_run_status", **stage, status="succeeded") == 0
    assert _value(fams, "minikafka_stage_last_success_timestamp_seconds", **stage) == _epoch(good["finished_at"])
    assert _value(fams, "minikafka_stage_last_failure_timestamp_seconds", **stage) == _epoch(failed["finished_at"])
    assert _value(fams, "minikafka_stage_last_run_timestamp_seconds", **stage) == _epoch(failed["started_at"])
    for column in ("in", "out", "duplicate", "failed", "quarantined"):
        assert _value(fams, f"minikafka_stage_last_run_{column}_rows", **stage) == failed[f"rows_{column}"]
    assert failed["rows_in"] == 2 and failed["rows_out"] == failed["rows_duplicate"] == failed["rows_failed"] == 1
    assert _value(fams, "minikafka_stage_last_run_duration_seconds", **stage) == 60.0
    notify = {"stage": "notify"}
    assert _value(fams, "minikafka_stage_last_run_status", **notify, status="interrupted") == 1
    assert _value(fams, "minikafka_stage_last_interrupted_timestamp_seconds", **notify) == _epoch(
        interrupted["finished_at"])
    assert _value(fams, "minikafka_stage_last_success_timestamp_seconds", **notify) == 0  # never
    assert _value(fams, "minikafka_stage_last_run_quarantined_rows", **notify) == 2
    with Source(str(ledger)) as source:  # opening the queue writes its settings
        readings = source.topic("readings", Reading, dedup=None)
        assert _value(fams, "minikafka_topic_rows", topic="readings") == readings.count() == 7
        assert _value(fams, "minikafka_topic_appended_rows_total", topic="readings") == newest[0] == 7
        assert _value(fams, "minikafka_topic_newest_row_timestamp_seconds", topic="readings") == _epoch(newest[1])
        quarantined = len(source.quarantined("readings", limit=None))
        stats = readings.queue("alerts").stats()
    assert _value(fams, "minikafka_quarantine_rows", topic="readings") == quarantined == 3  # 2 + the dead job
    assert _value(fams, "minikafka_quarantined_rows_total") == quarantined  # nothing left the quarantine yet
    for state in ("pending", "processing", "dead"):
        assert _value(fams, "minikafka_queue_jobs", queue="readings:alerts", state=state) == stats[state]
    assert stats["dead"] == 1
    led = Ledger(str(ledger), read_only=True)
    lags = {(c.topic, c.name): c.lag for c in consumer_info(led.conn)}
    led.close()
    for (topic, consumer), lag in lags.items():
        assert _value(fams, "minikafka_consumer_lag_rows", topic=topic, consumer=consumer) == lag
    assert lags[("readings", "averages")] == 7
    backups = [r for r in runs if r["kind"] == "backup"]
    assert _value(fams, "minikafka_backup_last_success_timestamp_seconds") == _epoch(backups[0]["finished_at"])
    check_well_formed(text)


def check_well_formed(text: str) -> None:
    """Names and types by convention; no secret, no error text, no run id anywhere in it."""
    known = {f.name: f for f in FAMILIES}
    types = set()
    for family in parser.text_string_to_metric_families(text):
        name = _exposed(family)
        assert name in known, name
        assert name.startswith("minikafka_")
        assert family.type == known[name].type
        types.add(family.type)
        if "timestamp" in name or "duration" in name:
            assert name.endswith("_seconds")
        for sample in family.samples:
            assert sample.name == name, sample  # a counter's samples end in _total, a gauge's never do
            assert sample.name.endswith("_total") == (family.type == "counter"), sample
            assert set(sample.labels) == set(known[name].labels), sample
            assert sample.value == sample.value  # no NaN
            if family.type == "counter":
                assert sample.value >= 0 and sample.value == int(sample.value), sample
    assert types == {"gauge", "counter"}, types  # both kinds are exposed, so the checks above bite
    assert SECRET not in text
    assert "postgres" not in text and "refused" not in text and "SIGTERM" not in text  # errors are never labels
    assert not re.search(r"-\d{6}-(succeeded|failed|interrupted)|backup-\d{8}T", text)  # no run id


def test_metrics_command_prints_what_the_ledger_holds_after_good_failed_interrupted_runs_quarantine_and_backup(ledger):
    result = CliRunner().invoke(main, ["metrics", "--source", str(ledger)])
    assert result.exit_code == 0, result.output
    check_equals_ledger(result.output, ledger)


def test_metrics_with_a_pipeline_label_its_stages_and_show_one_that_never_ran(ledger):
    text = exposition(ledger, [PipelineScope("night", ("average", "never"))])
    check_equals_ledger(text, ledger, pipeline="night")
    fams = _families(text)
    assert _value(fams, "minikafka_stage_last_run_timestamp_seconds", pipeline="night", stage="never") == 0
    assert _value(fams, "minikafka_stage_last_run_status", stage="never", status="succeeded") == 0
    assert _value(fams, "minikafka_stage_last_run_status", pipeline="", stage="notify", status="interrupted") == 1


def test_textfile_is_written_whole_and_replaces_the_last_one(ledger, tmp_path):
    folder = tmp_path / "textfile"
    folder.mkdir()
    (folder / TEXTFILE_NAME).write_text("old\n")
    result = CliRunner().invoke(main, ["metrics", "--source", str(ledger), "--textfile", str(folder)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == [TEXTFILE_NAME]  # no temporary file left
    check_equals_ledger((folder / TEXTFILE_NAME).read_text(), ledger)


def test_textfile_into_a_missing_directory_is_one_line_and_writes_nothing(ledger, tmp_path):
    result = CliRunner().invoke(main, ["metrics", "--source", str(ledger), "--textfile", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert "no such directory" in result.output
    assert not (tmp_path / "nope").exists()


def test_console_serves_metrics_behind_its_auth_token_as_prometheus_sends_it(ledger):
    console = Console(ledger, "--auth-token", TOKEN)
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{console.url}/metrics", timeout=10)
        assert refused.value.code == 401
        request = urllib.request.Request(f"{console.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = response.read().decode()
    finally:
        console.stop()
    check_equals_ledger(text, ledger)
    assert TOKEN not in text


def test_a_run_recorded_after_a_scrape_shows_at_the_next_scrape_with_the_old_success_kept(ledger):
    before = _families(exposition(ledger))
    _run(ledger, "average", "interrupted", T0 + timedelta(hours=3))
    after = _families(exposition(ledger))
    stage = {"stage": "average"}
    assert _value(after, "minikafka_stage_last_run_status", **stage, status="interrupted") == 1
    assert (_value(after, "minikafka_stage_last_success_timestamp_seconds", **stage)
            == _value(before, "minikafka_stage_last_success_timestamp_seconds", **stage))


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (scripts/setup.sh installs Debian's prometheus)")
def test_promtool_check_metrics_finds_no_problem_in_our_exposition(ledger):
    text = exposition(ledger, [PipelineScope("night", ("average",))])
    done = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), done.stdout + done.stderr


def test_the_command_runs_as_a_user_runs_it(ledger):
    done = subprocess.run([sys.executable, "-m", "minikafka.cli", "metrics", "--source", str(ledger)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    check_well_formed(done.stdout)


def test_label_values_with_quotes_backslashes_and_line_breaks_read_back_exactly():
    from minikafka.ledger.consuming import LedgerFigures
    from minikafka.ledger.consuming.metrics_read import StageFigures, TopicFigures
    from minikafka.observe.prometheus import render

    odd = 'a "quoted" \\ stage\nname'
    text = render(LedgerFigures("x", 1, 0, stages=[StageFigures(odd, "running", 1.5)],
                                topics=[TopicFigures("t", 0, None)]), {odd: "p"})
    fams = _families(text)
    assert _value(fams, "minikafka_stage_last_run_status", stage=odd, status="running") == 1
    assert "minikafka_stage_last_run_duration_seconds" not in fams  # a running run has no duration yet
    check_well_formed(text)


def test_console_metrics_of_a_file_that_is_not_a_ledger_is_a_409_not_a_traceback(tmp_path):
    from starlette.testclient import TestClient

    from minikafka.console.app import create_app

    bogus = tmp_path / "bogus.sqlite"
    bogus.write_text("not a database, " * 100)
    with TestClient(create_app(str(bogus)), base_url="http://127.0.0.1") as client:
        response = client.get("/metrics")
    assert response.status_code == 409, response.text
    assert "cannot be read" in response.text


def test_a_pipeline_with_a_backups_directory_counts_only_this_ledgers_snapshots(ledger, tmp_path):
    from minikafka.ledger.files.snapshots import list_snapshots

    backups = ledger.parent.parent / "backups"
    other = tmp_path / "other.sqlite"
    Source(str(other)).close()
    backup(str(other), str(backups))  # another ledger's snapshot in the same directory
    pipeline = ledger.parent.parent / "night.toml"
    pipeline.write_text('[pipeline]\nname = "night"\nsource = "data/metrics.sqlite"\n\n[health]\nbackups = "backups"\n\n'
                        '[topics.readings]\nmodel = "tests.observe.test_metrics:Reading"\ndedup = []\n\n'
                        '[topics.averages]\nmodel = "tests.observe.test_metrics:Reading"\ndedup = []\n\n'
                        '[[stages]]\nname = "average"\njob = "jobs.keep_articles"\ninputs = ["readings"]\n'
                        'outputs = ["averages"]\n')
    result = CliRunner().invoke(main, ["metrics", "--pipeline", str(pipeline)])
    assert result.exit_code == 0, result.output
    fams = _families(result.output)
    mine = list_snapshots(backups, ledger)
    assert len(list_snapshots(backups)) == 2 and len(mine) == 1
    assert _value(fams, "minikafka_backup_snapshots") == 1
    assert _value(fams, "minikafka_backup_newest_snapshot_timestamp_seconds") == mine[0].taken_at.timestamp()
    assert _value(fams, "minikafka_stage_last_run_status", pipeline="night", stage="average", status="failed") == 1
    check_well_formed(result.output)


def test_counters_keep_their_value_when_retention_and_a_purge_lower_the_gauges_and_pruning_resets_runs(tmp_path):
    from minikafka.util.clock import ManualClock, use_clock

    path = tmp_path / "counters.sqlite"
    long_ago = datetime(2020, 1, 1, tzinfo=timezone.utc)
    with use_clock(ManualClock(long_ago)), Source(str(path)) as source:
        readings = source.topic("readings", Reading, dedup=None)
        readings.extend([{"sensor": "s", "value": float(i)} for i in range(5)])
        readings.consumer("all")
        for record in readings.iter_new(records=True, consumer="all"):
            record.ack()  # retention deletes only rows every consumer handled
    led = Ledger(str(path))
    with led.atomic() as conn:
        quarantine_in_current_transaction(conn, [
            Quarantined("readings", '{"sensor": "s9"}', "bad", "quality", format_timestamp(long_ago))] * 2)
    led.close()
    for hours in (0, 1, 2):
        _run(path, "average", "succeeded", long_ago + timedelta(hours=hours))
    before = _families(exposition(path))
    assert _value(before, "minikafka_topic_appended_rows_total", topic="readings") == 5
    assert _value(before, "minikafka_quarantined_rows_total") == 2
    assert _value(before, "minikafka_stage_runs_total", stage="average", status="succeeded") == 3

    with Source(str(path)) as source:
        source.topic("readings", Reading, dedup=None).set_retention("1d")
        assert source.apply_retention() == {"readings": 4}  # every row but the newest
    cli = CliRunner()
    purged = cli.invoke(main, ["quarantine", "readings", "purge", "--all", "--source", str(path)])
    assert purged.exit_code == 0, purged.output
    pruned = cli.invoke(main, ["prune", "--runs-older-than", "1d", "--source", str(path)])
    assert pruned.exit_code == 0, pruned.output

    after = _families(exposition(path))
    assert _value(after, "minikafka_topic_rows", topic="readings") == 1
    assert _value(after, "minikafka_topic_appended_rows_total", topic="readings") == 5
    assert _value(after, "minikafka_quarantine_rows", topic="readings") == 0
    assert _value(after, "minikafka_quarantined_rows_total") == 2
    # the run log keeps each stage's latest run: the counter falls to 1, a reset as its HELP says
    assert _value(after, "minikafka_stage_runs_total", stage="average", status="succeeded") == 1
    assert "Pruning the run log" in after["minikafka_stage_runs_total"].documentation


def test_the_wal_size_is_the_wal_files_while_a_writer_holds_it_open(ledger):
    writer = Ledger(str(ledger))
    try:
        with writer.atomic() as conn:  # the open connection keeps its -wal file from being checkpointed away
            write_run_in_current_transaction(conn, RunResult("average-extra", "stage", stage="average",
                                                             status="succeeded", started_at=format_timestamp(T0)))
        fams = _families(exposition(ledger))
        wal = ledger.with_name(ledger.name + "-wal")
        assert wal.stat().st_size > 0
        assert _value(fams, "minikafka_ledger_wal_bytes") == wal.stat().st_size
        assert _value(fams, "minikafka_stage_runs_total", stage="average", status="succeeded") == 2
    finally:
        writer.close()

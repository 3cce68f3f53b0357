"""No command creates a ledger (or its directory) by accident; reading commands open read-only.

A missing ledger is an error naming the path (exit 1). Only ingest/backfill into the
ledger of the pipeline that declares the topic, or --create, start a new one.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.ledger.transactions import LEDGER_FORMAT
from schemas.homelab import RssItem
from tests.cli.helpers import Item, invoke, seed
from tests.ledger.readonly import Immutable, fingerprint
from tests.pipelines.helpers import homelab_copy

LINE = '{"url": "https://a.example/1", "feed": "hn", "title": "t", "body": "b", "published": "2026-01-01T00:00:00Z"}\n'
FORMAT1 = Path(__file__).resolve().parents[1] / "data" / "ledger_format1.sqlite"

READING = [["topics"], ["status"], ["show", "items"], ["schema", "items"], ["consumers"], ["quarantine", "items"],
           ["export", "items", "--format", "jsonl", "out.jsonl"]]
WRITING = [["replay", "items", "--consumer", "c"], ["prune", "--runs-older-than", "1d"], ["retention"],
           ["consumers", "--drop", "c"], ["quarantine", "items", "purge", "--all"], ["upgrade"],
           ["work", "mod:fn", "--queue", "q", "--once"]]


@pytest.fixture
def immutable():
    flags = Immutable()
    yield flags
    flags.release()


def _typo_pipeline(tmp_path: Path) -> tuple[Path, Path]:
    ledger = tmp_path / "typo" / "nested" / "homelab.sqlite"
    pipeline = homelab_copy(tmp_path, replace={f'source = "{tmp_path / "homelab.sqlite"}"': f'source = "{ledger}"'})
    return pipeline, ledger


@pytest.mark.parametrize("args", READING + WRITING, ids=lambda a: " ".join(a[:2]))
def test_every_ledger_command_on_a_missing_file_names_it_and_creates_nothing(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "typo" / "ledger.sqlite"
    out = invoke(*args, "--source", missing)
    assert out.exit_code == 1, out.output
    assert f"no ledger at {missing}" in out.output and "Traceback" not in out.output
    assert list(tmp_path.iterdir()) == []


def test_topics_on_missing_file_names_it_and_creates_nothing(tmp_path):
    missing = tmp_path / "ledger.sqlite"
    out = invoke("topics", "--source", missing)
    assert out.exit_code == 1
    assert out.output.startswith(f"Error: no ledger at {missing}: check the path (--source")
    assert list(tmp_path.iterdir()) == []


def test_run_with_typo_in_source_fails_and_creates_no_directory(tmp_path):
    pipeline, ledger = _typo_pipeline(tmp_path)
    out = invoke("run", pipeline)
    assert out.exit_code == 1
    assert f"no ledger at {ledger}" in out.output and f"check 'source =' in {pipeline}" in out.output
    assert "--create" in out.output and "total" not in out.output
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("args", [["check"], ["plan"], ["plot", "--counts"], ["watch", "--until-idle"]],
                         ids=lambda a: a[0])
def test_pipeline_commands_with_typo_in_source_fail_and_create_nothing(tmp_path, args):
    pipeline, ledger = _typo_pipeline(tmp_path)
    out = invoke(args[0], pipeline, *args[1:])
    assert out.exit_code == 1, out.output
    assert f"no ledger at {ledger}" in out.output
    assert not (tmp_path / "typo").exists()


def test_run_pipeline_in_python_refuses_a_missing_ledger(tmp_path):
    from minikafka import LedgerNotFoundError
    from minikafka.pipelines.definition import load_pipeline
    from minikafka.pipelines.runner import run_pipeline

    pipeline, ledger = _typo_pipeline(tmp_path)
    with pytest.raises(LedgerNotFoundError, match=f"no ledger at {ledger}"):
        run_pipeline(load_pipeline(pipeline), echo=lambda m: None)
    assert not (tmp_path / "typo").exists()


def test_stage_job_refuses_a_missing_ledger_before_starting_spark(tmp_path, capsys):
    from minikafka.job import main as job_main

    pipeline, ledger = _typo_pipeline(tmp_path)
    assert job_main(["--pipeline", str(pipeline), "--stage", "split_youtube"]) == 1
    assert f"no ledger at {ledger}" in capsys.readouterr().err
    assert not (tmp_path / "typo").exists()


def test_deliver_to_a_missing_ledger_names_it(tmp_path):
    spec = tmp_path / "deliveries.toml"
    spec.write_text('source = "nope/ledger.sqlite"\n[[deliveries]]\nname = "shipper"\ntopic = "orders"\n'
                    'endpoint = "http://127.0.0.1:9/"\n')
    out = invoke("deliver", spec, "--once")
    assert out.exit_code == 1 and "no ledger at" in out.output and "nope" in out.output
    assert not (tmp_path / "nope").exists()


def test_ingest_into_declared_pipeline_creates_the_ledger(tmp_path):
    pipeline = homelab_copy(tmp_path)
    out = invoke("ingest", pipeline, "rss.items", "-", input=LINE)
    assert out.exit_code == 0, out.output
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        assert src.topic("rss.items", RssItem, dedup=("url",)).count() == 1
        assert "rss.scored" in src.topics()


def test_ingest_into_declared_pipeline_in_a_missing_directory_creates_it(tmp_path):
    # a pipeline file's 'source =' is a declared place (the README's data/ is not in a fresh
    # clone): the first ingest makes the ledger and its directory, as --create does
    pipeline, ledger = _typo_pipeline(tmp_path)
    out = invoke("ingest", pipeline, "rss.items", "-", input=LINE)
    assert out.exit_code == 0, out.output
    with Source(str(ledger)) as src:
        assert src.topic("rss.items", RssItem, dedup=("url",)).count() == 1


def test_ingest_with_source_and_model_into_a_missing_file_needs_create(tmp_path):
    new = tmp_path / "new" / "ledger.sqlite"
    args = ("ingest", "--source", new, "--model", "tests.cli.helpers:Item", "--dedup", "url", "items", "-")
    row = '{"title": "a", "url": "ua", "score": 0.5}\n'
    refused = invoke(*args, input=row)
    assert refused.exit_code == 1 and f"no ledger at {new}" in refused.output and "--create" in refused.output
    assert not new.parent.exists()
    assert invoke(*args, "--create", input=row).exit_code == 0
    with Source(str(new)) as src:
        assert [m.url for m in src.topic("items", Item, dedup=("url",)).iter_new()] == ["ua"]


def test_backfill_into_a_missing_file_fails_before_spark_starts(tmp_path):
    missing = tmp_path / "ledger.sqlite"
    dump = tmp_path / "dump.jsonl"
    dump.write_text('{"title": "a", "url": "ua", "score": 0.5}\n')
    t0 = time.monotonic()
    out = invoke("backfill", "items", dump, "--model", "tests.cli.helpers:Item", "--source", missing)
    assert out.exit_code == 1 and f"no ledger at {missing}" in out.output and "--create" in out.output
    assert time.monotonic() - t0 < 10 and not missing.exists()


def test_create_flag_creates_an_empty_ledger(tmp_path):
    pipeline, ledger = _typo_pipeline(tmp_path)
    out = invoke("run", pipeline, "--create")  # nothing to process: no stage starts a JVM
    assert out.exit_code == 0, out.output
    with Source(str(ledger), read_only=True) as src:
        assert "rss.items" in src.topics()
        assert src.topic("rss.items", RssItem, dedup=("url",)).count() == 0


def test_read_only_file_can_be_listed(tmp_path, immutable):
    db = tmp_path / "ledger.sqlite"
    seed(str(db))
    immutable(db)
    out = invoke("topics", "--json", "--source", db)
    assert out.exit_code == 0, out.output
    assert [t["topic"] for t in json.loads(out.output)] == ["items"]
    assert invoke("status", "--source", db).exit_code == 0
    drop = invoke("consumers", "items", "--drop", "clean", "--source", db)
    assert drop.exit_code == 1 and f"cannot write to {db}" in drop.output and "read-only" in drop.output
    assert "Traceback" not in drop.output


def test_immutable_snapshot_in_readonly_directory_can_be_shown(tmp_path, immutable):
    db = tmp_path / "ledger.sqlite"
    seed(str(db))
    snap = tmp_path / "backup"
    snap.mkdir()
    shutil.copy(db, snap / "ledger.sqlite")
    immutable(snap / "ledger.sqlite", snap)
    out = invoke("show", "items", "--json", "--source", snap / "ledger.sqlite")
    assert out.exit_code == 0, out.output
    assert [r["url"] for r in json.loads(out.output)] == ["u0", "u1", "u2", "u3", "u4"]
    exported = invoke("export", "items", "--format", "jsonl", tmp_path / "out.jsonl", "--source", snap / "ledger.sqlite")
    assert exported.exit_code == 0 and len((tmp_path / "out.jsonl").read_text().splitlines()) == 5
    assert sorted(p.name for p in snap.iterdir()) == ["ledger.sqlite"]


def test_topics_does_not_wait_behind_a_writer(tmp_path):
    db = tmp_path / "ledger.sqlite"
    seed(str(db))
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute('INSERT INTO "items" ("_created_at", title, url, score) '
                   "VALUES ('2026-01-01T00:00:00Z', 'w', 'uncommitted', 1)")
    try:
        t0 = time.monotonic()
        out = invoke("topics", "--json", "--source", db)
        elapsed = time.monotonic() - t0
        shown = invoke("show", "items", "--json", "--limit", "0", "--source", db)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert out.exit_code == 0, out.output
    assert elapsed < 5  # the write lock is never taken (busy_timeout would wait 30 s)
    [topic] = json.loads(out.output)
    assert topic["topic"] == "items" and topic["new"] + topic["handled"] == 5
    assert len(json.loads(shown.output)) == 5


def test_reading_commands_write_nothing_to_a_current_ledger(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # export writes out.jsonl here, not into the checkout
    db = tmp_path / "ledger.sqlite"
    seed(str(db))
    before = fingerprint(tmp_path)["ledger.sqlite"]
    for args in READING:
        assert invoke(*args, "--source", db).exit_code == 0, args
    assert fingerprint(tmp_path)["ledger.sqlite"] == before


def test_reading_commands_ask_for_upgrade_on_an_old_ledger_and_upgrade_does_it(tmp_path):
    db = tmp_path / "old.sqlite"
    shutil.copy(FORMAT1, db)
    before = fingerprint(tmp_path)["old.sqlite"]
    out = invoke("topics", "--source", db)
    assert out.exit_code == 1 and "format 1" in out.output and f"minikafka upgrade --source {db}" in out.output
    assert fingerprint(tmp_path)["old.sqlite"] == before
    upgraded = invoke("upgrade", "--source", db)
    assert upgraded.exit_code == 0 and f"upgraded from ledger format 1 to {LEDGER_FORMAT}" in upgraded.output
    assert "nothing to upgrade" in invoke("upgrade", "--source", db).output
    listed = invoke("topics", "--json", "--source", db)
    assert listed.exit_code == 0 and [t["topic"] for t in json.loads(listed.output)] == ["videos"]

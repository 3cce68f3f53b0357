"""The health, backup, restore and doctor commands: exit codes, one line per check, JSON, errors."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.ledger.consuming import RunResult, write_run_in_current_transaction
from minikafka.ledger.transactions import Ledger, filecheck
from minikafka.pipelines.definition import load_pipeline
from minikafka.pipelines.runner import run_pipeline
from tests.cli.helpers import invoke, seed

ROOT = Path(__file__).resolve().parents[2]


def _more(ledger: str, n: int) -> None:
    from tests.cli.helpers import Item

    with Source(ledger) as source:
        items = source.topic("items", Item, dedup=("url",))
        start = items.count()
        items.extend([{"title": f"t{i}", "url": f"u{i}", "score": 0.5} for i in range(start, start + n)])


def _failed_run(ledger: str) -> None:
    led = Ledger(ledger)
    with led.atomic() as conn:
        write_run_in_current_transaction(conn, RunResult("nightly-1", "stage", stage="nightly").finish("failed", "boom"))
    led.close()


def test_health_prints_one_line_per_check_and_exits_1_when_one_fails(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"))
    ok = invoke("health", "-s", ledger)
    assert ok.exit_code == 0, ok.output
    _failed_run(ledger)
    failing = invoke("health", "-s", ledger)
    assert failing.exit_code == 1
    assert failing.stdout.splitlines()[0].startswith("fail  stage nightly last run: failed (nightly-1")
    assert failing.stdout.rstrip().endswith("boom")
    report = json.loads(invoke("health", "-s", ledger, "--json").stdout)
    assert report["state"] == "fail" and report["checks"][0]["numbers"]["status"] == "failed"


def test_health_with_a_bad_limit_in_the_pipeline_is_a_definition_error(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"))
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(f'[pipeline]\nsource = "{ledger}"\n[topics.items]\nmodel = "tests.cli.helpers:Item"\n'
                        'freshness = "soon"\n[[stages]]\nname = "s"\njob = "jobs.score"\ninputs = ["items"]\n'
                        'outputs = ["items2"]\n[topics.items2]\nmodel = "tests.cli.helpers:Item"\n')
    result = invoke("health", "--pipeline", pipeline)
    assert result.exit_code == 2
    assert 'topics."items".freshness: freshness must be a positive duration' in result.output \
        or "topics.items.freshness: freshness must be a positive duration" in result.output


def test_backup_then_restore_from_the_command_line(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"), n=3)
    dest = tmp_path / "backups"
    made = invoke("backup", dest, "-s", ledger, "--keep", "3", "--json")
    assert made.exit_code == 0, made.output
    snapshot = json.loads(made.stdout)["snapshot"]
    _more(ledger, 3)
    back = invoke("restore", snapshot, "-s", ledger)
    assert back.exit_code == 0, back.output
    assert back.stdout.startswith(f"restored {Path(ledger).resolve()} from ")
    assert sqlite3.connect(ledger).execute("SELECT count(*) FROM items").fetchone()[0] == 3


def test_backup_keep_must_be_at_least_one(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"))
    result = invoke("backup", tmp_path / "b", "-s", ledger, "--keep", "0")
    assert result.exit_code == 2 and "--keep" in result.output


def test_restore_refuses_with_one_error_line_while_the_ledger_is_open_elsewhere(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"))
    snapshot = json.loads(invoke("backup", tmp_path / "b", "-s", ledger, "--json").stdout)["snapshot"]
    holder = subprocess.Popen([sys.executable, "-c", "import sys, sqlite3; c = sqlite3.connect(sys.argv[1]); "
                               "c.execute('SELECT 1 FROM items').fetchall(); print('open', flush=True); sys.stdin.read()",
                               ledger], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        result = invoke("restore", snapshot, "-s", ledger)
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "open in another process" in result.output
    assert "Traceback" not in result.output


def test_doctor_checks_the_set_up_and_prints_a_litestream_configuration(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"))
    checks = json.loads(invoke("doctor", "-s", ledger, "--json").stdout)
    names = [c["name"] for c in checks]
    assert names[:4] == ["ledger file system", "ledger journal", "ledger wal", "disk space"]
    assert {"java", "jdbc jar", "spark"} <= set(names)
    config = invoke("doctor", "-s", ledger, "--litestream", "--replica", tmp_path / "replica").stdout
    assert f'  - path: "{Path(ledger).resolve()}"' in config
    assert f'      url: "file://{(tmp_path / "replica").resolve()}"' in config


def test_doctor_names_a_reader_that_pins_the_write_ahead_log(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"))
    reader = subprocess.Popen([sys.executable, "-c", "import sys, sqlite3; c = sqlite3.connect(sys.argv[1]); "
                               "c.execute('BEGIN'); c.execute('SELECT count(*) FROM items').fetchone(); "
                               "print('reading', flush=True); sys.stdin.read()", ledger],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "reading"
        _more(ledger, 50)
        checks = {c["name"]: c for c in json.loads(invoke("doctor", "-s", ledger, "--json").stdout)}
    finally:
        reader.stdin.close()
        reader.wait(timeout=10)
    wal = checks["ledger wal"]
    assert wal["state"] == "warn" and "a reader holds an old snapshot" in wal["reason"]
    assert wal["numbers"]["frames"] > wal["numbers"]["copied"]


def test_a_ledger_on_a_network_file_system_is_named(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nserver:/export {tmp_path} nfs4 rw 0 0\n")
    kind = filecheck.filesystem_type(tmp_path / "data" / "l.sqlite", mounts=str(mounts))
    assert kind == "nfs4" and filecheck.is_network_filesystem(kind)
    assert not filecheck.is_network_filesystem(filecheck.filesystem_type("/usr", mounts=str(mounts)))


def test_run_with_backup_before_snapshots_the_ledger_before_the_first_stage(tmp_path):
    from schemas.homelab import RssItem

    ledger = tmp_path / "homelab.sqlite"
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(f'[pipeline]\nsource = "{ledger}"\n[topics."rss.items"]\nmodel = "schemas.homelab:RssItem"\n'
                        '[topics."rss.articles"]\nmodel = "schemas.homelab:RssItem"\n[[stages]]\nname = "keep_articles"\n'
                        'job = "jobs.keep_articles"\ninputs = ["rss.items"]\noutputs = ["rss.articles"]\n')
    with Source(str(ledger)) as source:
        source.topic("rss.items", RssItem, dedup=None)
    lines = []
    result = run_pipeline(load_pipeline(pipeline), backup_before=str(tmp_path / "b"), echo=lines.append)
    assert result.ok
    snapshot = next((tmp_path / "b").glob("*.sqlite"))
    assert any(line.startswith(f"backup {tmp_path / 'b' / snapshot.name}") for line in lines)
    conn = sqlite3.connect(snapshot)
    assert conn.execute("SELECT count(*) FROM _minikafka_runs WHERE stage = 'keep_articles'").fetchone()[0] == 0
    assert sqlite3.connect(ledger).execute(
        "SELECT count(*) FROM _minikafka_runs WHERE stage = 'keep_articles'").fetchone()[0] == 1


@pytest.mark.parametrize("command", ["health", "backup", "restore", "doctor"])
def test_every_new_command_help_ends_with_an_example(command):
    result = invoke(command, "--help")
    assert "Example: minikafka " in result.output


def test_status_leaves_health_checks_out_unless_asked_for(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"))
    _failed_run(ledger)
    for _ in range(3):
        invoke("health", "-s", ledger)
    shown = [r["kind"] for r in json.loads(invoke("status", "-s", ledger, "--json").stdout)]
    assert shown == ["stage"]
    health = json.loads(invoke("status", "-s", ledger, "--stage", "health", "--json").stdout)
    assert [r["kind"] for r in health] == ["health"] * 3


def test_a_ledger_on_a_network_file_system_is_refused_at_open(tmp_path, monkeypatch):
    from minikafka import LedgerError

    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nserver:/export {tmp_path / 'nfs'} nfs4 rw 0 0\n")
    (tmp_path / "nfs").mkdir()
    monkeypatch.setattr(filecheck, "MOUNTS", str(mounts))
    with pytest.raises(LedgerError, match=r"is on nfs4, a network file system.*keep the ledger on a local disk"):
        Source(str(tmp_path / "nfs" / "l.sqlite"))
    assert not (tmp_path / "nfs" / "l.sqlite").exists()
    monkeypatch.setenv(filecheck.ALLOW_ENV, "1")
    Source(str(tmp_path / "nfs" / "l.sqlite")).close()
    Source(str(tmp_path / "local.sqlite")).close()

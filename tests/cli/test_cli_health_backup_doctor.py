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
from tests.cli.helpers import damage_table_root, invoke, seed

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
    assert failing.stdout.splitlines()[0].endswith("boom")
    assert failing.stdout.splitlines()[-1] == "ok    ledger integrity: PRAGMA quick_check ok"
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
    assert names[:6] == ["ledger file system", "ledger", "ledger journal", "ledger wal", "ledger integrity",
                         "disk space"]
    assert all(c["state"] in ("ok", "warn") for c in checks if c["name"].startswith("ledger")), checks
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


# -- the morning after, by a clumsy operator or on a bad disk -------------------------------------

def test_restore_into_a_directory_that_does_not_exist_yet_creates_it(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"), n=4)
    snapshot = json.loads(invoke("backup", tmp_path / "b", "-s", ledger, "--json").stdout)["snapshot"]
    fresh = tmp_path / "new-machine" / "data" / "l.sqlite"
    back = invoke("restore", snapshot, "-s", fresh)
    assert back.exit_code == 0, back.output
    assert "Traceback" not in back.output
    assert sqlite3.connect(fresh).execute("SELECT count(*) FROM items").fetchone()[0] == 4


def test_restore_of_a_zero_byte_snapshot_with_a_matching_checksum_is_refused(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"), n=4)
    dest = tmp_path / "b"
    dest.mkdir()
    empty = dest / "l-backup-20300101T000000.000000Z-no-runs.sqlite"
    empty.write_bytes(b"")
    (dest / (empty.name + ".sha256")).write_text(f"{'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'}"
                                                 f"  {empty.name}\n")
    for target in (empty, dest):
        result = invoke("restore", target, "-s", ledger)
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output
        if target == empty:
            assert "an empty file, not a ledger" in result.output
    assert sqlite3.connect(ledger).execute("SELECT count(*) FROM items").fetchone()[0] == 4


def test_backup_into_an_empty_destination_is_refused_instead_of_writing_here(tmp_path, monkeypatch):
    ledger = seed(str(tmp_path / "l.sqlite"))
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    result = invoke("backup", "", "-s", ledger)
    assert result.exit_code != 0 and "empty path" in result.output, result.output
    assert list(here.iterdir()) == []


def test_health_on_a_zero_byte_file_does_not_turn_it_into_a_ledger(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    result = invoke("health", "--source", empty)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "empty" in result.output
    assert empty.stat().st_size == 0 and not Path(f"{empty}-wal").exists()


def test_health_reports_a_ledger_that_fails_quick_check(tmp_path):
    ledger = seed(str(tmp_path / "l.sqlite"))
    assert invoke("health", "-s", ledger).exit_code == 0
    damage_table_root(ledger, "items")
    result = invoke("health", "-s", ledger)
    assert result.exit_code == 1, result.output
    assert any(line.startswith("fail  ledger integrity: PRAGMA quick_check") for line in result.stdout.splitlines())
    report = json.loads(invoke("health", "-s", ledger, "--json").stdout)
    assert report["state"] == "fail"


@pytest.mark.parametrize("content", ["text", "truncated"])
def test_health_and_doctor_on_a_text_or_truncated_file_fail_the_ledger_and_run_every_other_check(tmp_path, content):
    path = tmp_path / "l.sqlite"
    if content == "text":
        path.write_text("this is not a ledger\n" * 200)
    else:
        seed(str(path), n=400)
        sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        with open(path, "r+b") as fh:
            fh.truncate(path.stat().st_size // 2)
    before = path.read_bytes()
    doctor = invoke("doctor", "-s", path)
    assert doctor.exit_code == 1 and "Traceback" not in doctor.output and not doctor.output.startswith("Error:")
    assert "fail  ledger" in doctor.stdout and "java" in doctor.stdout, doctor.output
    checks = {c["name"]: c for c in json.loads(invoke("doctor", "-s", path, "--json").stdout)}
    assert {"ledger file system", "disk space", "java", "jdbc jar", "spark"} <= set(checks)
    assert "fail" in {c["state"] for n, c in checks.items() if n.startswith("ledger")}
    health = json.loads(invoke("health", "-s", path, "--json").stdout)
    assert health["state"] == "fail" and health["checks"][0]["name"].startswith("ledger")
    assert path.read_bytes() == before


def test_a_backup_that_cannot_record_its_run_still_succeeds_and_warns(tmp_path, monkeypatch):
    (tmp_path / "nfs").mkdir()
    ledger = seed(str(tmp_path / "nfs" / "l.sqlite"))
    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nserver:/export {tmp_path / 'nfs'} nfs4 rw 0 0\n")
    monkeypatch.setattr(filecheck, "MOUNTS", str(mounts))
    filecheck._cached_type.cache_clear()
    try:
        result = invoke("backup", tmp_path / "b", "-s", ledger, "--json")
    finally:
        filecheck._cached_type.cache_clear()
    assert result.exit_code == 0, result.output
    made = json.loads(result.stdout)
    assert Path(made["snapshot"]).is_file() and made["warnings"]
    assert "warning: the snapshot is complete, but its run could not be recorded" in result.stderr
    assert "network file system" in result.stderr


def _run_on_a_tiny_disk(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    """``script`` (bash) in a mount namespace of its own, where ``$DISK`` is a 1 MB tmpfs."""
    import shutil

    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to mount a small disk")
    disk = tmp_path / "disk"
    disk.mkdir()
    prelude = (f"set -u\nDISK={disk}\nmount -t tmpfs -o size=1m tmpfs \"$DISK\" || exit 97\n"
               f"mk() {{ {sys.executable} -m minikafka.cli \"$@\"; }}\n")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", prelude + script],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    if done.returncode == 97 or "unshare failed" in done.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    return done


COUNT = (f"{sys.executable} -c 'import sqlite3, sys; "
         "print(\"items\", sqlite3.connect(sys.argv[1]).execute(\"SELECT count(*) FROM items\").fetchone()[0])'")


def _big_snapshot(tmp_path: Path) -> str:
    """A snapshot of about 2 MB: more than the tiny disk holds."""
    from tests.cli.helpers import Item

    ledger = str(tmp_path / "big.sqlite")
    with Source(ledger) as source:
        source.topic("items", Item, dedup=("url",)).extend(
            [{"title": "x" * 400, "url": f"u{i}", "score": 0.5} for i in range(4000)])
    return json.loads(invoke("backup", tmp_path / "b", "-s", ledger, "--json").stdout)["snapshot"]


def test_restore_onto_a_full_disk_is_one_line_and_changes_nothing(tmp_path):
    snapshot = _big_snapshot(tmp_path)
    done = _run_on_a_tiny_disk(tmp_path, f"""
{sys.executable} -c 'from tests.cli.helpers import seed; seed("'$DISK'/l.sqlite", n=3)'
mk restore {snapshot} --source "$DISK/l.sqlite" --from-other-ledger; echo "exit=$?"
mk restore {snapshot} --source "$DISK/new/data/l.sqlite"; echo "exit=$?"
{COUNT} "$DISK/l.sqlite"
ls -A "$DISK" | tr '\\n' ' '; echo
""")
    out = done.stdout + done.stderr
    assert "Traceback" not in out, out
    assert done.stdout.count("exit=1") == 2, out
    assert done.stderr.count("Error: ") == 2 and "No space left on device" in done.stderr, out
    assert "\nitems 3\n" in done.stdout, out  # the ledger's data as it was (its run log says a restore failed)
    assert done.stdout.splitlines()[-1].split() == ["l.sqlite"], out


def test_restore_onto_a_read_only_disk_is_one_line_and_changes_nothing(tmp_path):
    snapshot = json.loads(invoke("backup", tmp_path / "b", "-s", seed(str(tmp_path / "l.sqlite")), "--json")
                          .stdout)["snapshot"]
    done = _run_on_a_tiny_disk(tmp_path, f"""
{sys.executable} -c 'from tests.cli.helpers import seed; seed("'$DISK'/l.sqlite", n=3)'
before=$(sha256sum "$DISK/l.sqlite")
mount -o remount,ro "$DISK"
mk restore {snapshot} --source "$DISK/l.sqlite" --from-other-ledger; echo "exit=$?"
mk restore {snapshot} --source "$DISK/new/l.sqlite"; echo "exit=$?"
[ "$(sha256sum "$DISK/l.sqlite")" = "$before" ] && echo same
ls -A "$DISK" | tr '\\n' ' '; echo
""")
    out = done.stdout + done.stderr
    assert "Traceback" not in out, out
    assert done.stdout.count("exit=1") == 2, out
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 2 and all(e.startswith("Error: ") and "Read-only file system" in e for e in errors), out
    assert "\nsame\n" in done.stdout, out
    assert done.stdout.splitlines()[-1].split() == ["l.sqlite"], out


def test_opening_a_zero_byte_file_without_create_does_not_turn_it_into_a_ledger(tmp_path):
    from minikafka import LedgerNotFoundError

    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    with pytest.raises(LedgerNotFoundError, match="the file is empty"):
        Source(str(empty), create=False)
    assert empty.stat().st_size == 0
    result = invoke("quarantine", "items", "purge", "--all", "--source", empty)
    assert result.exit_code == 1 and "empty" in result.output, result.output
    assert empty.stat().st_size == 0

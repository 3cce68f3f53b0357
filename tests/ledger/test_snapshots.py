"""Backups: online, consistent, complete or absent; restore puts one back, refusing while in use."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from minikafka import BackupError, LedgerInUseError, SnapshotNotFoundError, Source
from minikafka.ledger.files import backup, restore, snapshots
from tests.ledger.ledger_writers import Event, make_ledger

ROOT = Path(__file__).resolve().parents[2]
BACKUPS = int(os.environ.get("MINIKAFKA_TEST_BACKUPS", "3"))  # more for a longer soak


def _writer(kind: str, ledger: Path, stop: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.ledger.ledger_writers", kind, str(ledger), str(stop)],
                            cwd=ROOT)


def _one(db: Path, sql: str, params=()):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchone()
    finally:
        conn.close()


def _assert_consistent(snap: Path, appended_before: int) -> None:
    assert snapshots.integrity_problems(snap) == []
    count, top = _one(snap, "SELECT count(*), max(seq) FROM events")
    assert count == (top + 1 if top is not None else 0), "the appends in a snapshot are a prefix, without gaps"
    assert count >= appended_before, "every append committed before the backup started is in it"
    dst_rows, runs_with_rows = _one(snap, 'SELECT count(*), count(DISTINCT "_run_id") FROM dst')
    committed, committed_runs = _one(
        snap, "SELECT coalesce(sum(rows_out), 0), count(*) FROM _minikafka_runs WHERE stage = 'copier' AND rows_out > 0")
    assert dst_rows == committed and runs_with_rows == committed_runs, "no stage commit is in it by halves"
    orphans = _one(snap, 'SELECT count(*) FROM dst WHERE "_run_id" NOT IN (SELECT run_id FROM _minikafka_runs)')[0]
    assert orphans == 0


def test_a_backup_taken_while_a_stage_commits_and_an_appender_appends_is_consistent(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger), src_rows=3000)
    stop = tmp_path / "stop"
    writers = [_writer("append", ledger, stop), _writer("stage", ledger, stop)]
    try:
        deadline = time.monotonic() + 30
        while (_one(ledger, "SELECT count(*) FROM _minikafka_runs WHERE stage = 'copier'")[0] < 2
               or _one(ledger, "SELECT count(*) FROM events")[0] < 50) and time.monotonic() < deadline:
            time.sleep(0.05)
        taken = []
        for _ in range(BACKUPS):
            appended = _one(ledger, "SELECT count(*) FROM events")[0]
            result = backup(ledger, tmp_path / "backups")
            taken.append((Path(result.snapshot), appended))
    finally:
        stop.touch()
        for w in writers:
            w.wait(timeout=30)
    assert all(w.returncode == 0 for w in writers)
    for snap, appended in taken:
        _assert_consistent(snap, appended)
        snapshots.verify_checksum(snap)
    last_runs = [_one(snap, "SELECT count(*) FROM _minikafka_runs WHERE stage = 'copier'")[0] for snap, _ in taken]
    assert last_runs == sorted(last_runs)


def test_a_backup_names_the_last_committed_run_and_leaves_a_row_in_the_run_log(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    with Source(str(ledger)) as source:
        source.topic("events", Event, dedup=("seq",)).pipe(lambda e: e).to(
            source.topic("copy", Event, dedup=("seq",))).run()
        last = source.ledger.conn.execute("SELECT run_id FROM _minikafka_runs ORDER BY rowid DESC LIMIT 1").fetchone()[0]
    result = backup(ledger, tmp_path / "b")
    assert result.last_run == last and last in Path(result.snapshot).name
    assert (tmp_path / "b" / (Path(result.snapshot).name + ".sha256")).read_text().splitlines()[0].split() == [
        result.sha256, Path(result.snapshot).name]
    row = _one(ledger, "SELECT kind, status, details FROM _minikafka_runs WHERE run_id = ?", (result.run_id,))
    assert row[0] == "backup" and row[1] == "succeeded" and Path(result.snapshot).name in row[2]


def test_retention_keeps_the_newest_snapshots_of_the_ledger_only(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    other = tmp_path / "other.sqlite"
    make_ledger(str(other))
    dest = tmp_path / "b"
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    backup(other, dest, clock=lambda: start)
    made = [backup(ledger, dest, keep=2, clock=lambda i=i: start + timedelta(hours=i)) for i in range(4)]
    kept = {s.path.name for s in snapshots.list_snapshots(dest, ledger.resolve())}
    assert kept == {Path(m.snapshot).name for m in made[-2:]}
    assert len(snapshots.list_snapshots(dest, other.resolve())) == 1
    assert made[-1].removed and not any(Path(p).exists() for p in made[-1].removed)
    assert not list(dest.glob("*.sha256")) or all(Path(str(p)[:-7]).exists() for p in dest.glob("*.sha256"))


@pytest.mark.parametrize("point", ["backup:copied", "backup:before-rename"])
def test_a_backup_killed_at_any_point_leaves_no_file_that_looks_complete(tmp_path, point):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger), src_rows=2000)
    dest = tmp_path / "b"
    env = {**os.environ, "MINIKAFKA_FREEZE_AT": point}
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "backup", str(dest), "-s", str(ledger)],
                            cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:
            if line.startswith(f"FROZEN {point}"):
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert snapshots.list_snapshots(dest) == []
    assert not [p for p in dest.iterdir() if p.suffix == ".sqlite" and not p.name.startswith(".")]
    result = backup(ledger, dest)  # and the next backup clears what the killed one left
    assert sorted(p.name for p in dest.iterdir()) == [Path(result.snapshot).name, Path(result.snapshot).name + ".sha256"]


def test_a_backup_killed_while_it_copies_a_large_ledger_leaves_no_file_that_looks_complete(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    conn = sqlite3.connect(ledger)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE filler (b BLOB)")
    conn.executemany("INSERT INTO filler VALUES (randomblob(8192))", [()] * 12_000)  # ~100 MB
    conn.commit()
    conn.close()
    make_ledger(str(ledger))
    dest = tmp_path / "b"
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "backup", str(dest), "-s", str(ledger)], cwd=ROOT,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            partial = [p for p in dest.glob(".*partial*") if p.stat().st_size > 1_000_000] if dest.exists() else []
            if partial or proc.poll() is not None:
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    if proc.returncode == 0:
        pytest.skip("the backup finished before it could be killed")
    assert snapshots.list_snapshots(dest) == []
    assert not [p for p in dest.iterdir() if p.suffix == ".sqlite" and not p.name.startswith(".")]


def test_restore_puts_the_snapshot_back_and_keeps_the_replaced_file_aside(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    with Source(str(ledger)) as source:
        source.topic("events", Event, dedup=("seq",)).extend([{"seq": i} for i in range(10)])
    taken = backup(ledger, tmp_path / "b")
    with Source(str(ledger)) as source:
        source.topic("events", Event, dedup=("seq",)).extend([{"seq": i} for i in range(10, 15)])
    done = restore(ledger, taken.snapshot)
    assert _one(ledger, "SELECT count(*) FROM events")[0] == 10
    assert _one(Path(done.replaced), "SELECT count(*) FROM events")[0] == 15
    assert done.taken_at == taken.taken_at and "restored" in done.summary()
    assert _one(ledger, "SELECT kind, status FROM _minikafka_runs WHERE run_id = ?", (done.run_id,)) == (
        "restore", "succeeded")
    with Source(str(ledger)) as source:  # the restored ledger takes writes again
        source.topic("events", Event, dedup=("seq",)).append({"seq": 10})


def test_restore_refuses_while_another_process_has_the_ledger_open(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    taken = backup(ledger, tmp_path / "b")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, sqlite3; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM events').fetchone(); "
        "print('open', flush=True); sys.stdin.read()"), str(ledger)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(LedgerInUseError, match="open in another process"):
            restore(ledger, taken.snapshot)
        assert not list(tmp_path.glob("ledger.sqlite.replaced-*"))
        assert _one(ledger, "SELECT status, error FROM _minikafka_runs WHERE kind = 'restore'")[0] == "failed"
        assert _one(ledger, "SELECT count(*) FROM events")[0] == 0
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    restore(ledger, taken.snapshot)


def test_restore_refuses_a_snapshot_whose_checksum_does_not_match(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    taken = Path(backup(ledger, tmp_path / "b").snapshot)
    with open(taken, "r+b") as fh:
        fh.seek(200)
        fh.write(b"\x00\x01")
    with pytest.raises(BackupError, match="checksum mismatch"):
        restore(ledger, taken)


def test_before_run_picks_the_newest_snapshot_taken_before_that_run_started(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    dest = tmp_path / "b"
    first = backup(ledger, dest)
    with Source(str(ledger)) as source:
        source.topic("events", Event, dedup=("seq",)).append({"seq": 1})
        source.topic("events", Event, dedup=("seq",)).pipe(lambda e: e).to(
            source.topic("copy", Event, dedup=("seq",))).run()
        bad_run = source.ledger.conn.execute(
            "SELECT run_id FROM _minikafka_runs WHERE kind != 'backup' ORDER BY rowid DESC LIMIT 1").fetchone()[0]
    backup(ledger, dest)
    done = restore(ledger, dest, before_run=bad_run)
    assert done.snapshot == str(Path(first.snapshot).resolve())
    assert _one(ledger, "SELECT count(*) FROM events")[0] == 0
    with pytest.raises(SnapshotNotFoundError, match="not in the run log"):
        restore(ledger, dest, before_run="no-such-run")


def test_restore_then_rerun_gives_the_ledger_a_run_from_that_point_gives(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))

    def rerun() -> list[tuple]:
        with Source(str(ledger)) as source:
            source.topic("events", Event, dedup=("seq",)).pipe(lambda e: {"seq": e.seq * 10}).to(
                source.topic("tens", Event, dedup=("seq",))).run()
            rows = source.ledger.conn.execute('SELECT seq, "_parent_id" FROM tens ORDER BY "_id"').fetchall()
            pending = source.topic("events", Event, dedup=("seq",)).count("new")
        return rows + [("pending", pending)]

    with Source(str(ledger)) as source:
        source.topic("events", Event, dedup=("seq",)).extend([{"seq": i} for i in range(20)])
    taken = backup(ledger, tmp_path / "b")
    first = rerun()
    with Source(str(ledger)) as source:  # a later, bad change
        source.topic("events", Event, dedup=("seq",)).extend([{"seq": i} for i in range(20, 25)])
    restore(ledger, taken.snapshot)
    assert rerun() == first


def test_a_ledger_whose_log_holds_no_frames_is_hashed_while_it_is_copied_and_reads_in_rollback_journal_mode(
        tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger), src_rows=500)  # its last connection closed: the log was folded in and removed
    made = snapshots.take_snapshot(ledger, tmp_path / "b")
    snap = made.snapshot.path
    assert not made.folded
    snapshots.verify_checksum(snap)
    assert snapshots.sha256_of(snap) == made.sha256
    assert snap.read_bytes()[18:20] == b"\x01\x01" and ledger.read_bytes()[18:20] == b"\x02\x02"
    assert _one(snap, "PRAGMA journal_mode")[0] == "delete"
    assert snapshots.integrity_problems(snap) == []
    assert _one(snap, "SELECT count(*) FROM src")[0] == 500
    assert sorted(p.name for p in snap.parent.iterdir()) == [snap.name, snap.name + ".sha256"]


def test_commits_still_in_the_log_are_folded_into_the_snapshot_and_its_checksum_is_the_final_files(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    with Source(str(ledger)) as source:  # open: its commits stay in the log (too few for a checkpoint)
        events = source.topic("events", Event, dedup=("seq",))
        for seq in range(50):
            events.append({"seq": seq})
        assert Path(f"{ledger}-wal").stat().st_size > 32
        made = snapshots.take_snapshot(ledger, tmp_path / "b")
    snap = made.snapshot.path
    assert made.folded
    assert _one(snap, "SELECT count(*) FROM events")[0] == 50
    snapshots.verify_checksum(snap)
    assert _one(snap, "PRAGMA journal_mode")[0] == "delete"
    assert sorted(p.name for p in snap.parent.iterdir()) == [snap.name, snap.name + ".sha256"]


def test_a_ledger_outside_wal_mode_is_copied_through_the_backup_api(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger), src_rows=50)
    conn = sqlite3.connect(ledger)
    assert conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    conn.close()
    made = snapshots.take_snapshot(ledger, tmp_path / "b")
    assert _one(made.snapshot.path, "SELECT count(*) FROM src")[0] == 50
    assert _one(made.snapshot.path, "PRAGMA journal_mode")[0] == "delete"


def test_restore_onto_a_machine_without_the_ledger_puts_the_snapshot_in_place(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger), src_rows=7)
    taken = backup(ledger, tmp_path / "b")
    fresh = tmp_path / "new-machine" / "ledger.sqlite"
    fresh.parent.mkdir()
    done = restore(fresh, taken.snapshot)
    assert done.replaced is None
    assert _one(fresh, "SELECT count(*) FROM src")[0] == 7


def test_restore_refuses_while_a_stage_holds_its_run_lock_without_a_connection_open(tmp_path):
    from minikafka.util.filelock import exclusive_lock

    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    taken = backup(ledger, tmp_path / "b")
    with exclusive_lock(tmp_path / ".minikafka-locks" / "score.lock", note="run score-1"):
        with pytest.raises(LedgerInUseError, match=r"a run holds score.lock \(pid \d+ run score-1\)"):
            restore(ledger, taken.snapshot)
    assert restore(ledger, taken.snapshot).replaced is not None


def _swap_two_indexes(ledger: Path) -> None:
    """Two well-formed indexes of one table, each pointing at the other's b-tree: every page
    is sound (quick_check passes), every index disagrees with its table (integrity_check fails)."""
    conn = sqlite3.connect(str(ledger), isolation_level=None)
    try:
        conn.execute("CREATE TABLE side (a INTEGER, b INTEGER)")
        conn.execute("CREATE INDEX side_a ON side (a)")
        conn.execute("CREATE INDEX side_b ON side (b)")
        conn.executemany("INSERT INTO side VALUES (?, ?)", [(i, 1000 - i) for i in range(200)])
        roots = dict(conn.execute("SELECT name, rootpage FROM sqlite_schema WHERE name IN ('side_a', 'side_b')"))
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_schema SET rootpage = ? WHERE name = 'side_a'", (roots["side_b"],))
        conn.execute("UPDATE sqlite_schema SET rootpage = ? WHERE name = 'side_b'", (roots["side_a"],))
        conn.execute("PRAGMA writable_schema = OFF")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def test_a_backup_runs_quick_check_by_default_and_integrity_check_when_asked(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    quick = backup(ledger, tmp_path / "b")
    assert quick.check == "quick_check" and "quick_check ok" in quick.summary()
    full = backup(ledger, tmp_path / "b", full_check=True)
    assert full.check == "integrity_check" and "integrity_check ok" in full.summary()
    details = _one(ledger, "SELECT details FROM _minikafka_runs WHERE run_id = ?", (full.run_id,))[0]
    assert '"check": "integrity_check"' in details


def test_an_index_that_disagrees_with_its_table_passes_quick_check_but_not_full_check_or_restore(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    _swap_two_indexes(ledger)
    taken = backup(ledger, tmp_path / "b")  # quick_check: every page and b-tree is sound
    assert taken.check == "quick_check"
    with pytest.raises(BackupError, match=r"failed PRAGMA integrity_check: .*side_"):
        backup(ledger, tmp_path / "b", full_check=True)
    assert [s.path for s in snapshots.list_snapshots(tmp_path / "b")] == [Path(taken.snapshot)]
    with pytest.raises(BackupError, match=r"failed PRAGMA integrity_check"):
        restore(ledger, taken.snapshot)  # restore compares every index with its table before anything moves


def test_the_backup_command_takes_full_check(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    done = subprocess.run([sys.executable, "-m", "minikafka.cli", "backup", str(tmp_path / "b"), "-s", str(ledger),
                           "--full-check", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert '"check": "integrity_check"' in done.stdout


def test_a_log_restarted_while_it_is_copied_is_left_out_and_the_file_alone_is_the_snapshot(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    writer = sqlite3.connect(str(ledger), isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("CREATE TABLE side (n INTEGER)")
        writer.executemany("INSERT INTO side VALUES (?)", [(i,) for i in range(300)])
        writer.execute("PRAGMA wal_checkpoint(PASSIVE)")  # all in the file; the log keeps its (copied-in) frames
        header = Path(f"{ledger}-wal").read_bytes()[:32]
        env = {**os.environ, "MINIKAFKA_FREEZE_AT": "backup:log-copied", "MINIKAFKA_FREEZE_MODE": "stop"}
        code = ("import sys, json; from minikafka.ledger.files.snapshots import take_snapshot; "
                "m = take_snapshot(sys.argv[1], sys.argv[2]); print(json.dumps([str(m.snapshot.path), m.folded]))")
        proc = subprocess.Popen([sys.executable, "-c", code, str(ledger), str(tmp_path / "b")], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            for line in proc.stderr:
                if line.startswith("FROZEN backup:log-copied"):
                    break
            # the backup's snapshot is the file alone (the log was all copied in): this writer may restart the log
            writer.executemany("INSERT INTO side VALUES (?)", [(i,) for i in range(300, 310)])
            assert Path(f"{ledger}-wal").read_bytes()[:32] != header, "the log restarted"
        finally:
            proc.send_signal(signal.SIGCONT)
            out, err = proc.communicate(timeout=60)
    finally:
        writer.close()
    assert proc.returncode == 0, err
    snap, folded = __import__("json").loads(out)
    assert folded is False  # the copied log was left out: its frames and the file may be of different states
    assert snapshots.integrity_problems(Path(snap)) == []
    assert _one(Path(snap), "SELECT count(*) FROM side")[0] == 300


# -- a ledger's identity: snapshots of two ledgers with one file name in one directory -------------

def _two_homelabs(tmp_path: Path) -> tuple[Path, Path]:
    """staging/homelab.sqlite (3 src rows) and prod/homelab.sqlite (5 src rows): one file name."""
    staging, prod = tmp_path / "staging" / "homelab.sqlite", tmp_path / "prod" / "homelab.sqlite"
    for path, rows in ((staging, 3), (prod, 5)):
        path.parent.mkdir()
        make_ledger(str(path), src_rows=rows)
    return staging, prod


def _ledger_id(path: Path) -> str | None:
    row = _one(path, "SELECT value FROM _minikafka_meta WHERE key = 'ledger_id'")
    return row[0] if row else None


def test_a_new_ledger_has_an_identity_and_an_old_one_gets_one_on_its_first_open(tmp_path):
    import shutil

    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    first = _ledger_id(ledger)
    assert first and len(first) == 32
    with Source(str(ledger)):
        pass
    assert _ledger_id(ledger) == first, "reopening keeps it"
    old = tmp_path / "old.sqlite"
    shutil.copy(ROOT / "tests" / "data" / "ledger_format1.sqlite", old)
    assert _ledger_id(old) is None
    with Source(str(old)):
        pass
    assert _ledger_id(old) and _ledger_id(old) != first


def test_a_snapshot_carries_its_ledgers_identity_in_the_copy_and_beside_it(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    made = backup(ledger, tmp_path / "b")
    snap = Path(made.snapshot)
    assert _ledger_id(snap) == _ledger_id(ledger)
    assert f'"ledger_id": "{_ledger_id(ledger)}"' in snapshots.checksum_path(snap).read_text()
    assert snapshots.list_snapshots(tmp_path / "b")[0].ledger_id == _ledger_id(ledger)
    done = subprocess.run(["sha256sum", "-c", "--strict", snapshots.checksum_path(snap).name], cwd=snap.parent,
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_backup_keep_prunes_only_its_own_ledgers_snapshots(tmp_path):
    staging, prod = _two_homelabs(tmp_path)
    dest = tmp_path / "backups"
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    prods = [backup(prod, dest, clock=lambda i=i: start + timedelta(hours=i)) for i in range(2)]
    backup(staging, dest, clock=lambda: start + timedelta(hours=5))
    last = backup(staging, dest, keep=1, clock=lambda: start + timedelta(hours=6))
    assert len(last.removed) == 1
    assert all(Path(p.snapshot).exists() for p in prods), "prod's snapshots are not staging's to prune"
    assert len(snapshots.list_snapshots(dest, prod)) == 2 and len(snapshots.list_snapshots(dest, staging)) == 1


def test_restore_from_a_directory_picks_only_snapshots_of_the_target_ledger(tmp_path):
    staging, prod = _two_homelabs(tmp_path)
    dest = tmp_path / "backups"
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    mine = backup(prod, dest, clock=lambda: start)
    backup(staging, dest, clock=lambda: start + timedelta(hours=1))  # newer, same file name
    with Source(str(prod)) as source:
        source.topic("events", Event, dedup=("seq",)).extend([{"seq": i} for i in range(4)])
    done = restore(prod, dest)
    assert done.snapshot == mine.snapshot
    assert _one(prod, "SELECT count(*) FROM src")[0] == 5 and _one(prod, "SELECT count(*) FROM events")[0] == 0


def test_restore_from_a_directory_without_the_targets_snapshots_refuses_and_names_what_it_found(tmp_path):
    from minikafka.errors import ForeignSnapshotError

    staging, prod = _two_homelabs(tmp_path)
    dest = tmp_path / "backups"
    taken = backup(staging, dest)
    prod_id = _ledger_id(prod)
    with pytest.raises(SnapshotNotFoundError, match=rf"no snapshot of {prod} .*in {dest}.*{_ledger_id(staging)}.*"
                       rf"{staging}.*--from-other-ledger"):
        restore(prod, dest)
    with pytest.raises(ForeignSnapshotError, match=r"another ledger.*--from-other-ledger"):
        restore(prod, taken.snapshot)
    assert _one(prod, "SELECT count(*) FROM src")[0] == 5 and _ledger_id(prod) == prod_id
    refused = _one(prod, "SELECT count(*) FROM _minikafka_runs WHERE kind = 'restore' AND status = 'failed'")[0]
    assert refused == 2, "the ledger says a restore was refused, and nothing else changed"


def test_restoring_another_ledgers_snapshot_needs_the_flag_and_the_ledger_keeps_its_identity(tmp_path):
    staging, prod = _two_homelabs(tmp_path)
    prod_id = _ledger_id(prod)
    taken = backup(staging, tmp_path / "backups")
    done = restore(prod, taken.snapshot, from_other_ledger=True)
    assert done.snapshot == taken.snapshot
    assert _one(prod, "SELECT count(*) FROM src")[0] == 3
    assert _ledger_id(prod) == prod_id, "restore keeps the ledger's identity"
    assert snapshots.integrity_problems(prod) == []
    after = backup(prod, tmp_path / "backups", keep=1)  # and prod's backups stay prod's
    assert _ledger_id(Path(after.snapshot)) == prod_id and not after.removed


def test_restore_onto_a_fresh_machine_from_a_directory_of_two_ledgers_refuses_and_names_them(tmp_path):
    staging, prod = _two_homelabs(tmp_path)
    dest = tmp_path / "backups"
    backup(staging, dest)
    mine = backup(prod, dest)
    fresh = tmp_path / "new-machine" / "homelab.sqlite"
    with pytest.raises(SnapshotNotFoundError, match=r"snapshots of 2 ledgers.*pass the snapshot file") as refused:
        restore(fresh, dest)
    assert _ledger_id(staging) in str(refused.value) and _ledger_id(prod) in str(refused.value)
    assert not fresh.exists()
    assert restore(fresh, mine.snapshot).replaced is None
    assert _one(fresh, "SELECT count(*) FROM src")[0] == 5 and _ledger_id(fresh) == _ledger_id(prod)

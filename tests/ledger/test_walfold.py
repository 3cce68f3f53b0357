"""Folding a copied write-ahead log into a copy: the same pages as SQLite's own checkpoint leaves,
for logs that grow, shrink, end in a torn or damaged frame, or were restarted over older frames."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.ledger.files import snapshots, walfold
from minikafka.ledger.files.filecopy import copy_file_steadily

# bytes of page 1 that leaving WAL mode through SQLite rewrites and our fold leaves as logged:
# the file change counter (24-27) and the version-valid-for number and SQLite version (92-99)
WRITE_COUNTERS = (range(24, 28), range(92, 100))


def _writer(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # every commit stays in the log
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("CREATE INDEX IF NOT EXISTS t_body ON t (body)")
    return conn


def _insert(conn: sqlite3.Connection, start: int, n: int) -> None:
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"{i:06d}" + "x" * (i % 900)) for i in range(start, start + n)])
    conn.execute("COMMIT")


def _folded_by_sqlite(db: Path, wal: Path, out: Path) -> bytes:
    shutil.copyfile(db, out)
    shutil.copyfile(wal, f"{out}-wal")
    conn = sqlite3.connect(str(out), isolation_level=None)
    assert conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    conn.close()
    return out.read_bytes()


def _folded_by_us(db: Path, wal: Path, out: Path) -> bytes:
    committed = walfold.read_log(wal)
    folding = walfold.FoldedPages(wal, committed)
    try:
        copied = copy_file_steadily(db, out, on_copied=folding.apply_upto)
        fd = os.open(out, os.O_RDWR)
        try:
            folding.finish(fd, copied)
            os.pwrite(fd, b"\x01\x01", 18)
        finally:
            os.close(fd)
    finally:
        folding.close()
    return out.read_bytes()


def _same_pages(ours: bytes, theirs: bytes) -> None:
    assert len(ours) == len(theirs)
    a, b = bytearray(ours), bytearray(theirs)
    for span in WRITE_COUNTERS:
        for i in span:
            a[i] = b[i] = 0
    assert a == b


def _snapshot_of(tmp_path: Path, conn_path: Path, name: str) -> tuple[Path, Path]:
    """A copy of the database file and its log as they are now (the writer idle)."""
    db, wal = tmp_path / f"{name}.db", tmp_path / f"{name}.db-wal-copy"
    shutil.copyfile(conn_path, db)
    shutil.copyfile(f"{conn_path}-wal", wal)
    return db, wal


@pytest.fixture
def live(tmp_path):
    """A database whose file holds an early state and whose log holds later commits: it grew,
    lost rows, and was vacuumed smaller than the file."""
    path = tmp_path / "live.sqlite"
    Source(str(path)).close()  # a ledger: its run log names the last run of a snapshot
    conn = _writer(path)
    _insert(conn, 0, 3000)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file holds 3,000 rows, the log nothing
    _insert(conn, 3000, 500)
    conn.execute("DELETE FROM t WHERE id % 3 = 0")
    conn.execute("VACUUM")  # the last commit's database is smaller than the file
    _insert(conn, 10_000, 40)
    yield path, conn
    conn.close()


def test_the_fold_leaves_the_pages_sqlites_checkpoint_leaves(tmp_path, live):
    path, _conn = live
    db, wal = _snapshot_of(tmp_path, path, "a")
    assert os.path.getsize(db) > walfold.read_log(wal).db_pages * 4096  # it shrank: the copy is cut
    _same_pages(_folded_by_us(db, wal, tmp_path / "ours.sqlite"), _folded_by_sqlite(db, wal, tmp_path / "theirs.sqlite"))
    check = sqlite3.connect(tmp_path / "ours.sqlite")
    assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert check.execute("SELECT count(*), max(id) FROM t").fetchone() == (3500 - 1167 + 40, 10_039)
    check.close()


def test_a_log_that_grows_the_database_past_its_file_appends_the_new_pages(tmp_path):
    path = tmp_path / "young.sqlite"
    conn = _writer(path)  # nothing checkpointed: the file is empty, every page is in the log
    _insert(conn, 0, 800)
    db, wal = _snapshot_of(tmp_path, path, "y")
    conn.close()
    assert os.path.getsize(db) == 4096 and walfold.read_log(wal).db_pages > 100  # the file: page 1 only
    _same_pages(_folded_by_us(db, wal, tmp_path / "ours.sqlite"), _folded_by_sqlite(db, wal, tmp_path / "theirs.sqlite"))


@pytest.mark.parametrize("damage", ["torn last frame", "bad checksum in the middle", "uncommitted tail"])
def test_a_damaged_or_unfinished_log_is_folded_up_to_its_last_intact_commit_as_sqlite_does(tmp_path, live, damage):
    path, conn = live
    if damage == "uncommitted tail":
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, "y" * 3000) for i in range(20_000, 22_000)])
        db, wal = _snapshot_of(tmp_path, path, "d")  # frames spilled by a big transaction, no commit frame
        conn.execute("ROLLBACK")
    else:
        db, wal = _snapshot_of(tmp_path, path, "d")
    frames = (os.path.getsize(wal) - 32) // (24 + 4096)
    if damage == "torn last frame":
        os.truncate(wal, os.path.getsize(wal) - 1000)
    elif damage == "bad checksum in the middle":
        with open(wal, "r+b") as fh:
            fh.seek(32 + (frames // 2) * (24 + 4096) + 24 + 100)
            byte = fh.read(1)
            fh.seek(-1, os.SEEK_CUR)
            fh.write(bytes([byte[0] ^ 0xFF]))
    committed = walfold.read_log(wal)
    assert 0 < committed.frames < frames
    _same_pages(_folded_by_us(db, wal, tmp_path / "ours.sqlite"), _folded_by_sqlite(db, wal, tmp_path / "theirs.sqlite"))


def test_frames_of_a_log_restarted_over_older_ones_end_where_the_new_salts_end(tmp_path, live):
    path, conn = live
    conn.execute("PRAGMA wal_checkpoint(RESTART)")  # the next commit writes the log from its start again
    _insert(conn, 30_000, 5)  # a few new frames, then the older frames with the old salts
    db, wal = _snapshot_of(tmp_path, path, "r")
    committed = walfold.read_log(wal)
    assert committed.frames < (os.path.getsize(wal) - 32) // (24 + 4096) // 10
    _same_pages(_folded_by_us(db, wal, tmp_path / "ours.sqlite"), _folded_by_sqlite(db, wal, tmp_path / "theirs.sqlite"))


def test_a_log_that_is_not_one_has_nothing_committed_and_a_long_one_is_left_to_sqlite(tmp_path, live):
    path, _conn = live
    junk = tmp_path / "junk-wal"
    junk.write_bytes(b"\x00" * 5000)
    assert walfold.read_log(junk).frames == 0
    _db, wal = _snapshot_of(tmp_path, path, "l")
    assert walfold.read_log(wal, max_frames=10) is None


def test_a_live_backup_with_commits_in_its_log_is_folded_as_it_is_copied_and_hashed_once(tmp_path, live):
    path, _conn = live
    made = snapshots.take_snapshot(path, tmp_path / "b", full_check=True)
    assert made.folded and made.check == "integrity_check"
    snapshots.verify_checksum(made.snapshot.path)
    db, wal = _snapshot_of(tmp_path, path, "s")  # nothing was written since: the same state
    _same_pages(made.snapshot.path.read_bytes(), _folded_by_sqlite(db, wal, tmp_path / "theirs.sqlite"))
    assert not Path(f"{made.snapshot.path}-wal").exists()

"""Opening a ledger: what may be created, what is written, and read-only opens.

Tests run as root, where mode 0444 stops nothing: truly read-only files and
directories come from ``chattr +i`` (see readonly.py; skipped where not allowed).
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from minikafka import (
    LedgerError,
    LedgerNotFoundError,
    LedgerUpgradeRequiredError,
    ReadOnlyLedgerError,
    Source,
)
from minikafka.ledger.transactions import LEDGER_FORMAT, connection
from minikafka.ledger.transactions.schema import schema_objects, schema_statements
from tests.conftest import Video
from tests.ledger.readonly import Immutable, fingerprint

WRITING = {"BEGIN", "CREATE", "INSERT", "UPDATE", "DELETE", "ALTER", "DROP", "REPLACE"}
FORMAT1 = Path(__file__).resolve().parents[1] / "data" / "ledger_format1.sqlite"


@pytest.fixture
def immutable():
    flags = Immutable()
    yield flags
    flags.release()


def _ledger(path: Path, n: int = 3) -> Path:
    with Source(str(path)) as src:
        t = src.topic("videos", Video, dedup=("url",))
        t.extend([{"creator": "c", "url": f"u{i}", "length_seconds": i} for i in range(n)])
        t.consumer("reader")
    return path


def _read_everything(src: Source) -> tuple:
    t = src.topic("videos", Video, dedup=("url",))
    return src.topics(), t.count(), [m.url for m in t.iter_new(consumer="reader")], src.runs()


def test_every_schema_statement_is_a_named_create_if_not_exists():
    assert len(schema_objects()) == len(schema_statements())


def test_opening_a_current_ledger_writes_nothing(tmp_path, monkeypatch):
    path = _ledger(tmp_path / "ledger.sqlite")
    before = fingerprint(tmp_path)
    observer = sqlite3.connect(path)
    version = observer.execute("PRAGMA data_version").fetchone()[0]
    statements: list[str] = []
    real_connect = sqlite3.connect

    def traced(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(connection.sqlite3, "connect", traced)
    for kwargs in ({}, {"create": False}, {"read_only": True}):
        with Source(str(path), **kwargs) as src:
            pass
        writes = [s for s in statements if s.split()[0].upper() in WRITING]
        assert writes == [], kwargs  # not even BEGIN IMMEDIATE: no write lock taken
        with Source(str(path), **kwargs) as src:
            assert _read_everything(src)[1] == 3
        statements.clear()
    assert observer.execute("PRAGMA data_version").fetchone()[0] == version  # no commit by anyone else
    observer.close()
    after = fingerprint(tmp_path)
    assert after["ledger.sqlite"] == before["ledger.sqlite"]  # same size, mtime and bytes


def test_opening_does_not_wait_behind_a_writer(tmp_path):
    path = _ledger(tmp_path / "ledger.sqlite")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute('INSERT INTO "videos" ("_created_at", creator, url, length_seconds) '
                   "VALUES ('2026-01-01T00:00:00Z', 'w', 'uncommitted', 1)")
    try:
        for kwargs in ({}, {"read_only": True}):
            t0 = time.monotonic()
            with Source(str(path), busy_timeout=10, **kwargs) as src:
                topics, count, _, _ = _read_everything(src)
            assert time.monotonic() - t0 < 5, kwargs
            assert (topics, count) == (["videos"], 3)  # the writer's open transaction is not seen
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_missing_file_with_create_false_names_it_and_creates_nothing(tmp_path):
    missing = tmp_path / "typo" / "ledger.sqlite"
    for kwargs in ({"create": False}, {"read_only": True}):
        with pytest.raises(LedgerNotFoundError, match=f"no ledger at {missing}") as info:
            Source(str(missing), **kwargs)
        assert info.value.path == str(missing)
        assert isinstance(info.value, LedgerError)
    assert not missing.parent.exists()
    plain = tmp_path / "ledger.sqlite"
    with pytest.raises(LedgerNotFoundError):
        Source(str(plain), create=False)
    assert list(tmp_path.iterdir()) == []


def test_source_path_still_creates_a_missing_file_as_minikafka_does(tmp_path):
    path = tmp_path / "new.sqlite"
    with Source(str(path)) as src:
        assert src.topics() == []
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM _minikafka_meta WHERE key = 'format'").fetchone() == (str(LEDGER_FORMAT),)


def test_writing_through_a_read_only_source_names_the_path(tmp_path):
    path = _ledger(tmp_path / "ledger.sqlite")
    before = fingerprint(tmp_path)["ledger.sqlite"]
    with Source(str(path), read_only=True) as src:
        assert src.read_only and "read_only=True" in repr(src)
        t = src.topic("videos", Video, dedup=("url",))  # reopening an existing topic reads only
        with pytest.raises(ReadOnlyLedgerError, match=f"cannot write to {path}: this Source was opened read-only") \
                as info:
            t.append({"creator": "c", "url": "new", "length_seconds": 1})
        assert info.value.path == str(path)
        with pytest.raises(ReadOnlyLedgerError):
            src.topic("other", Video, dedup=None)
        with pytest.raises(ReadOnlyLedgerError):
            src.notify("chan", {"x": 1})
        with pytest.raises(sqlite3.OperationalError, match="readonly"):  # even raw SQL on the connection
            src._conn.execute("DELETE FROM videos")
        assert t.count() == 3
    assert fingerprint(tmp_path)["ledger.sqlite"] == before


def test_read_only_open_of_a_format_1_ledger_says_how_to_upgrade_and_changes_nothing(tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(FORMAT1, path)
    before = fingerprint(tmp_path)["old.sqlite"]
    with pytest.raises(LedgerUpgradeRequiredError, match="format 1.*minikafka upgrade --source") as info:
        Source(str(path), read_only=True)
    assert info.value.found == 1 and info.value.path == str(path)
    assert fingerprint(tmp_path)["old.sqlite"] == before
    with Source(str(path)) as src:  # opening for writing upgrades it
        assert src._ledger.upgraded_from == 1
    with Source(str(path), read_only=True) as src:
        assert src.topic("videos", Video, dedup=("url",)).count() == 5


def test_read_only_open_of_a_file_without_a_ledger_says_so(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(LedgerNotFoundError, match="the file is empty"):
        Source(str(empty), read_only=True)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE notes (x)")
    with pytest.raises(LedgerNotFoundError, match="without minikafka's tables"):
        Source(str(other), read_only=True)
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database " * 100)
    with pytest.raises(LedgerError, match="not an SQLite database"):
        Source(str(junk), read_only=True)


def test_a_table_added_since_the_file_was_written_reads_as_empty_read_only_and_is_created_on_write(tmp_path):
    path = _ledger(tmp_path / "ledger.sqlite")
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE _minikafka_notifications")
    before = fingerprint(tmp_path)["ledger.sqlite"]
    with Source(str(path), read_only=True) as src:
        assert src._conn.execute("SELECT count(*) FROM _minikafka_notifications").fetchone() == (0,)
    assert fingerprint(tmp_path)["ledger.sqlite"] == before
    with Source(str(path)) as src:
        src.notify("chan", 1)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM main._minikafka_notifications").fetchone() == (1,)


def test_read_only_file_can_be_read_and_writing_it_says_read_only(tmp_path, immutable):
    path = _ledger(tmp_path / "ledger.sqlite")
    immutable(path)
    with Source(str(path), read_only=True) as src:
        assert _read_everything(src)[1] == 3
    with Source(str(path)) as src:  # opened for writing: reading still works, the write names the file
        t = src.topic("videos", Video, dedup=("url",))
        with pytest.raises(ReadOnlyLedgerError, match=f"cannot write to {path}: the file .*is read-only"):
            t.append({"creator": "c", "url": "new", "length_seconds": 1})


def test_immutable_snapshot_in_a_read_only_directory_can_be_read(tmp_path, immutable):
    _ledger(tmp_path / "ledger.sqlite")
    snap = tmp_path / "snapshot"
    snap.mkdir()
    shutil.copy(tmp_path / "ledger.sqlite", snap / "ledger.sqlite")
    immutable(snap / "ledger.sqlite", snap)
    with Source(str(snap / "ledger.sqlite"), read_only=True) as src:
        assert _read_everything(src)[:3] == (["videos"], 3, ["u0", "u1", "u2"])
    assert sorted(p.name for p in snap.iterdir()) == ["ledger.sqlite"]  # no -wal, no -shm


def test_read_only_directory_with_commits_still_in_the_wal_explains_instead_of_reading_stale_data(tmp_path,
                                                                                                 immutable):
    path = _ledger(tmp_path / "ledger.sqlite")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA wal_autocheckpoint = 0")
    holder.execute("UPDATE videos SET length_seconds = 9")  # stays in the -wal while holder is open
    snap = tmp_path / "snapshot"
    snap.mkdir()
    shutil.copy(path, snap / "ledger.sqlite")
    shutil.copy(f"{path}-wal", snap / "ledger.sqlite-wal")
    holder.close()
    immutable(snap / "ledger.sqlite", snap / "ledger.sqlite-wal", snap)
    with pytest.raises(LedgerError, match=r"directory is read-only.*ledger.sqlite-wal"):
        Source(str(snap / "ledger.sqlite"), read_only=True)


def test_the_watcher_of_a_read_only_source_sees_commits_and_creates_nothing(tmp_path):
    path = _ledger(tmp_path / "ledger.sqlite")
    with Source(str(path), read_only=True) as src:
        t = src.topic("videos", Video, dedup=("url",))
        mark = src.watcher.mark()

        def write():
            with Source(str(path)) as w:
                w.topic("videos", Video, dedup=("url",)).append({"creator": "c", "url": "late", "length_seconds": 1})

        thread = threading.Thread(target=write)
        thread.start()
        thread.join()
        assert src.watcher.wait(mark, 5) > mark and t.count() == 4

"""The dedup hash (ledger/topics/keys.py) keeps dedup exact: two different keys whose hashes
collide are both stored, a true duplicate is never stored twice (inside one write, across
writes, of a collided key too), on every insert path; a load killed mid-transaction and
run again stores each key once; an older ledger gains the hash on upgrade.

Collisions are planted by replacing the hash function before the ledger is opened: every
value starting with "clash" hashes to the same number.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from minikafka import DuplicateMessageError, Source
from minikafka.ledger.topics import TopicTable, keys, rowfiles
from minikafka.util.clock import utc_now
from tests.conftest import Video

ROOT = Path(__file__).resolve().parents[2]
REAL = keys.dedup_hash
REAL_ARROW = keys.arrow_hashes


def planted(*values):
    if values and isinstance(values[0], str) and values[0].startswith("clash"):
        return 7
    return REAL(*values)


class Item(BaseModel):
    url: str
    n: int


def planted_of_arrow(layout, batch):
    """``keys.arrow_hashes`` with the planted collisions (the commit of Arrow batches hashes
    in Python, not through the SQL function)."""
    import numpy as np

    columns = [batch.column(name).to_pylist() for name in layout.dedup]
    return np.array([planted(*values) for values in zip(*columns)], dtype=np.int64)


@pytest.fixture(autouse=True)
def collide(monkeypatch):
    monkeypatch.setattr(keys, "dedup_hash", planted)
    monkeypatch.setattr(keys, "arrow_hashes", planted_of_arrow)


def stored(src: Source, topic: str = "t") -> list[str]:
    """The dedup values stored, in id order, read with plain SQL. (A write stores the rows
    whose hash collided after its other rows: compare them sorted.)"""
    return [r[0] for r in src.ledger.conn.execute(f'SELECT url FROM "{topic}" ORDER BY "_id"')]


def test_two_keys_with_one_hash_are_both_stored_and_their_duplicates_are_not(source):
    t = source.topic("t", Item, dedup=("url",))
    t.append({"url": "clash-a", "n": 1})
    t.append({"url": "clash-b", "n": 2})  # the same hash, another key: stored
    with pytest.raises(DuplicateMessageError, match="clash-b"):
        t.append({"url": "clash-b", "n": 3})
    with pytest.raises(DuplicateMessageError, match="clash-a"):
        t.append({"url": "clash-a", "n": 3})
    assert t.append({"url": "clash-b", "n": 4}, on_duplicate="ignore") is None
    t.append({"url": "clash-c", "n": 5}, on_duplicate="ignore")
    t.append({"url": "plain", "n": 6})
    assert stored(source) == ["clash-a", "clash-b", "clash-c", "plain"]
    hashes = dict(source.ledger.conn.execute('SELECT url, "_key" FROM t'))
    assert hashes["clash-a"] == 7 and hashes["clash-b"] is None and hashes["clash-c"] is None
    assert t.count() == 4 and [r.data.url for r in t.iter_new(records=True)] == stored(source)


def test_a_bulk_write_stores_each_key_once_with_duplicates_inside_it_and_across_writes(source):
    t = source.topic("t", Item, dedup=("url",))
    t.extend([{"url": "clash-a", "n": 0}, {"url": "x", "n": 0}])
    got = t.extend([{"url": u, "n": i} for i, u in enumerate(
        ["clash-b", "clash-a", "y", "clash-b", "clash-c", "x", "y", "clash-c"])], on_duplicate="ignore")
    assert sorted(stored(source)) == ["clash-a", "clash-b", "clash-c", "x", "y"]
    assert got == 3
    with pytest.raises(DuplicateMessageError, match="clash-c"):
        t.extend([{"url": "clash-d", "n": 0}, {"url": "clash-c", "n": 0}])
    assert t.extend([{"url": "clash-d", "n": 0}, {"url": "z", "n": 0}]) == 2  # raise mode, collisions only
    assert sorted(stored(source)) == ["clash-a", "clash-b", "clash-c", "clash-d", "x", "y", "z"]


def test_a_stage_commit_and_a_row_file_store_collided_keys_once(source, tmp_path):
    pa = pytest.importorskip("pyarrow")
    t = source.topic("t", Item, dedup=("url",))
    t.append({"url": "clash-a", "n": 0})
    table = TopicTable(source.ledger.conn, source.layout("t"))
    urls = ["clash-b", "clash-a", "clash-b", "q", "clash-c"]
    with source.ledger.atomic():
        written, duplicates = table.insert_arrow_in_current_transaction(
            [pa.RecordBatch.from_pydict({"url": urls, "n": list(range(5))})], utc_now(), "run-1")
    assert (written, duplicates) == (3, 2)
    path = str(tmp_path / "rows.sqlite")
    rows = [("clash-d", 1), ("clash-b", 2), ("r", 3), ("clash-d", 4), ("q", 5), ("clash-e", 6)]
    rowfiles.write_row_file(path, 2, rows, list(range(1, 7)), [])
    conn = source.ledger.conn
    with rowfiles.attached(conn, path, source.layout("t")) as file:
        (piece,) = list(file.slices(100))
        with source.ledger.atomic():
            assert table.insert_row_file_in_current_transaction(file, piece, utc_now(), "run-2") == 3
    assert sorted(stored(source)) == ["clash-a", "clash-b", "clash-c", "clash-d", "clash-e", "q", "r"]
    assert t.count() == 7


CHILD = textwrap.dedent("""
    import sys, time
    from pydantic import BaseModel
    from minikafka import Source
    from minikafka.ledger.topics import keys

    real = keys.dedup_hash
    keys.dedup_hash = lambda *v: 7 if str(v[0]).startswith("clash") else real(*v)

    class Item(BaseModel):
        url: str
        n: int

    path, stop = sys.argv[1], int(sys.argv[2])
    urls = [f"clash-{i % 40}" if i % 3 == 0 else f"u{i % 90}" for i in range(300)]
    with Source(path) as src:
        t = src.topic("t", Item, dedup=("url",))
        for lo in range(0, len(urls), 25):
            with src.transaction():
                t.extend([{"url": u, "n": i} for i, u in enumerate(urls[lo:lo + 25])], on_duplicate="ignore")
                if lo >= stop:
                    print("INSIDE", flush=True)
                    time.sleep(600)
    print("DONE", flush=True)
    """)


def test_a_load_killed_mid_transaction_and_run_again_stores_each_key_once(db_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, db_path, "150"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "INSIDE"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    again = subprocess.run([sys.executable, "-c", CHILD, db_path, "10000"], capture_output=True, text=True, env=env)
    assert again.stdout.strip() == "DONE", again.stderr
    with Source(db_path) as src:
        urls = stored(src)
    expected = {f"clash-{i % 40}" if i % 3 == 0 else f"u{i % 90}" for i in range(300)}
    assert sorted(urls) == sorted(expected) and len(urls) == len(set(urls))


def test_an_older_ledger_gains_the_dedup_hash_on_upgrade_and_stays_exact(tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(ROOT / "tests" / "data" / "ledger_format4.sqlite", path)
    with Source(str(path)) as src:
        assert src.ledger.upgraded_from == 4
        videos = src.topic("videos", Video, dedup=("url",))
        with pytest.raises(DuplicateMessageError, match="https://v/3"):
            videos.append(Video(creator="c", url="https://v/3", length_seconds=3))
        videos.append(Video(creator="c", url="https://v/6", length_seconds=6))
        conn = src.ledger.conn
        assert conn.execute('SELECT count(*) FROM videos WHERE "_key" IS NULL').fetchone()[0] == 0
        assert conn.execute('SELECT count(DISTINCT "_key") FROM videos').fetchone()[0] == 6
    check = sqlite3.connect(path)
    indexes = {r[0]: r[1] for r in check.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'index'")}
    assert "videos__key" in indexes and 'WHERE "_key" IS NULL' in indexes["videos__dedup"]
    assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    check.close()


def test_the_hash_is_the_stored_value_s_whatever_type_the_parameter_had(source):
    class Priced(BaseModel):
        price: float
        sku: int

    t = source.topic("p", Priced, dedup=("price", "sku"))
    t.append({"price": 1.0, "sku": 2})
    conn = source.ledger.conn
    layout = source.layout("p")
    with source.ledger.atomic():  # an int for the REAL column, a float for the INTEGER one: the same key
        assert TopicTable(conn, layout).insert_rows_in_current_transaction([(1, 2.0)], utc_now(),
                                                                           ignore_duplicates=True) == 0
    assert keys.dedup_hash(1.0, 2) == conn.execute('SELECT "_key" FROM p').fetchone()[0]
    assert keys.dedup_hash(0.0, 1) == keys.dedup_hash(-0.0, 1)


def test_the_hash_of_an_arrow_batch_is_the_hash_sql_computes_for_every_stored_type(source):
    pa = pytest.importorskip("pyarrow")

    class Keyed(BaseModel):
        name: str | None
        n: int | None
        raw: bytes | None

    source.topic("k", Keyed, dedup=("name", "n", "raw"))
    layout = source.layout("k")
    names = ["a", "", None, "héllo ✓ \U0001f600", "x" * 300, "clash-1"]
    ns = [1, -5, None, 2**63 - 1, -(2**63), 0]
    raws = [b"", b"\x00\x01", None, b"abc", b"z" * 200, b"\xff"]
    batch = pa.RecordBatch.from_arrays([pa.array(names, pa.string()), pa.array(ns, pa.int64()),
                                        pa.array(raws, pa.binary())], names=["name", "n", "raw"])
    got = REAL_ARROW(layout, batch).tolist()
    assert got == [REAL(*row) for row in zip(names, ns, raws)]
    int32 = pa.RecordBatch.from_arrays([pa.array(names, pa.large_string()), pa.array([1, 2, 3, 4, 5, 6], pa.int32()),
                                        pa.array(raws, pa.large_binary())], names=["name", "n", "raw"])
    assert REAL_ARROW(layout, int32).tolist() == [REAL(*row) for row in zip(names, range(1, 7), raws)]
    floats = pa.RecordBatch.from_arrays([pa.array(names), pa.array([1.0] * 6), pa.array(raws)],
                                        names=["name", "n", "raw"])
    assert REAL_ARROW(layout, floats) is None  # not what the INTEGER column stores: SQL hashes the stored value


def test_rows_committed_from_arrow_are_found_by_the_key_lookups_of_every_other_write(source, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    monkeypatch.setattr(keys, "dedup_hash", REAL)
    monkeypatch.setattr(keys, "arrow_hashes", REAL_ARROW)
    t = source.topic("t", Item, dedup=("url",))
    table = TopicTable(source.ledger.conn, source.layout("t"))
    urls = ["https://a/1", "https://a/2", "https://a/1", "é"]
    with source.ledger.atomic():
        assert table.insert_arrow_in_current_transaction(
            [pa.RecordBatch.from_pydict({"url": urls, "n": [1, 2, 3, 4]})], utc_now(), "run-1") == (3, 1)
    with pytest.raises(DuplicateMessageError, match="https://a/2"):
        t.append({"url": "https://a/2", "n": 9})
    assert t.extend([{"url": "é", "n": 0}, {"url": "new", "n": 0}], on_duplicate="ignore") == 1
    assert source.ledger.conn.execute(
        f'SELECT count(*) FROM t WHERE "_key" = {keys.FUNCTION}(url)').fetchone()[0] == 4


def test_a_row_file_carrying_its_writer_s_hashes_stores_collided_keys_once(source, tmp_path):
    t = source.topic("t", Item, dedup=("url",))
    t.append({"url": "clash-a", "n": 0})
    layout = source.layout("t")
    rows = [("clash-d", 1), ("clash-a", 2), ("r", 3), ("clash-d", 4), ("q", 5), ("clash-e", 6), ("r", 7)]
    hashes = keys.row_hashes(layout, rows)
    assert hashes[0] == 7 and hashes[2] == REAL("r")
    path = str(tmp_path / "rows.sqlite")
    rowfiles.write_row_file(path, 2, rows, list(range(1, 8)), [], hashes)
    with rowfiles.attached(source.ledger.conn, path, layout) as file:
        assert file.keyed
        (piece,) = list(file.slices(100))
        with source.ledger.atomic():
            assert TopicTable(source.ledger.conn, layout).insert_row_file_in_current_transaction(
                file, piece, utc_now(), "run-1") == 4
    assert sorted(stored(source)) == ["clash-a", "clash-d", "clash-e", "q", "r"]


def test_a_writer_s_hash_is_sql_s_and_a_value_of_another_type_is_left_to_sql(source, tmp_path):
    class Mixed(BaseModel):
        name: str | None
        n: int | None
        x: float | None
        raw: bytes | None

    source.topic("m", Mixed, dedup=("name", "n", "x", "raw"))
    layout = source.layout("m")
    rows = [("a", 1, 1.5, b"\x00"), (None, None, None, None), ("é", -(2**63), -0.0, b""),
            ("b", True, 1.0, b"1"), ("c", "5", 2.0, b"2"), ("d", 1, float("nan"), b"3"), ("e", 2**63, 1.0, b"4")]
    hashes = keys.row_hashes(layout, rows)
    assert hashes[:3] == [REAL(*row) for row in rows[:3]] and hashes[3:] == [None] * 4
    path = str(tmp_path / "rows.sqlite")
    rowfiles.write_row_file(path, 4, rows[:6], list(range(1, 7)), [], hashes[:6])
    with rowfiles.attached(source.ledger.conn, path, layout) as file:
        (piece,) = list(file.slices(100))
        with source.ledger.atomic():
            TopicTable(source.ledger.conn, layout).insert_row_file_in_current_transaction(file, piece, utc_now(), "r")
    conn = source.ledger.conn
    assert conn.execute(f'SELECT count(*) FROM m WHERE "_key" IS {keys.FUNCTION}(name, n, x, raw)').fetchone()[0] == 6


def test_the_one_text_field_shortcut_of_the_hash_gives_the_typed_encodings_number():
    """dedup_hash inlines the common key (one text value); the number is the documented one:
    blake2b (8 bytes) of tag 3, the UTF-8 length (8 bytes, big-endian) and the bytes."""
    import hashlib

    from minikafka.ledger.topics.keys import dedup_hash

    for text in ("", "https://example.com/posts/1", "ünïcødé ✓", "\ud800 lone surrogate", "x" * 10_000):
        raw = text.encode("utf-8", "surrogatepass")
        want = int.from_bytes(hashlib.blake2b(b"\x03" + len(raw).to_bytes(8, "big") + raw, digest_size=8).digest(),
                              "big", signed=True)
        assert dedup_hash(text) == want
        assert dedup_hash(text, None) != want  # two values take the general path, with the same encodings


def test_a_bulk_write_hashed_in_python_stores_the_hash_sql_computes_of_the_stored_values(source, monkeypatch):
    """A write of several rows hashes their dedup values in Python when their types are the
    columns' own (as a row file's writer does), and leaves every other row to SQL: either
    way the stored ``_key`` is SQL's hash of the value stored."""
    monkeypatch.setattr(keys, "dedup_hash", REAL)

    class Mixed(BaseModel):
        name: str | None
        price: float
        n: int
        raw: bytes | None

    source.topic("m", Mixed, dedup=("name", "price", "n", "raw"))
    conn = source.ledger.conn
    table = TopicTable(conn, source.layout("m"))
    typed = [("a", 1.5, 1, b"\x00"), ("héllo ✓ \U0001f600", -0.0, 2**63 - 1, None), (None, 2.0, -(2**63), b"")]
    cast = [("b", 1, 2.0, b"z"), ("c", 3.0, True, None)]  # an int for REAL, a float and a bool for INTEGER
    calls = []
    conn.create_function(keys.FUNCTION, -1, lambda *v: calls.append(v) or REAL(*v), deterministic=True)
    with source.ledger.atomic():
        assert table.insert_rows_in_current_transaction(typed, utc_now()) == 3
        assert calls == []  # hashed in Python
        assert table.insert_rows_in_current_transaction(cast, utc_now()) == 2
        assert len(calls) == 2  # hashed by SQL, from the values as stored
    rows = conn.execute('SELECT "_key", minikafka_key(name, price, n, raw), name FROM m ORDER BY "_id"').fetchall()
    assert [name for *_, name in rows] == ["a", "héllo ✓ \U0001f600", None, "b", "c"]
    assert all(stored == computed for stored, computed, _ in rows)
    with source.ledger.atomic():  # the same keys written again, every type: all found
        assert table.insert_rows_in_current_transaction(typed + [("b", 1.0, 2, b"z"), ("c", 3, 1, None)], utc_now(),
                                                        ignore_duplicates=True) == 0

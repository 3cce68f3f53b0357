"""Row files: a worker's checked rows as a standalone SQLite file, attached to the ledger
and inserted slice by slice with ``INSERT ... SELECT`` (backfill's JSONL commit)."""

from __future__ import annotations

import random
import sqlite3

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import StagingError
from minikafka.ledger.topics import TopicTable, write_row_file
from minikafka.ledger.topics.rowfiles import attached


class Item(BaseModel):
    url: str
    n: int


def _layout(src: Source, **kw):
    return src.topic("items", Item, **{"dedup": None, **kw}).layout


def _file(tmp_path, lines, refused=(), name="part.sqlite"):
    path = str(tmp_path / name)
    write_row_file(path, 2, [(f"u{line}", line) for line in lines], list(lines),
                   [(line, f"bad line {line}", f"raw {line}") for line in refused])
    return path


def test_slices_cover_every_line_once_in_order_with_each_refused_line_in_the_slice_that_reaches_it(tmp_path):
    rng = random.Random(23)
    with Source(str(tmp_path / "l.sqlite")) as src:
        layout = _layout(src)
        for case in range(40):
            total = rng.randint(0, 60)
            refused = sorted(rng.sample(range(1, total + 1), rng.randint(0, total))) if total else []
            accepted = [x for x in range(1, total + 1) if x not in refused]
            path = _file(tmp_path, accepted, refused, name=f"p{case}.sqlite")
            size, after = rng.randint(1, 9), rng.choice([0, 0, rng.randint(0, total + 1)])
            with attached(src.ledger.conn, path, layout) as rows:
                assert (rows.rows, rows.refused) == (len(accepted), len(refused))
                pieces = list(rows.slices(size, after_line=after))
                got_rows = [v for p in pieces for v in rows.values(p)]
            assert got_rows == [(f"u{x}", x) for x in accepted if x > after]
            assert [r[0] for p in pieces for r in p.refused] == [x for x in refused if x > after]
            previous = after
            for p in pieces:
                assert 0 <= p.accepted <= size and p.rows_read == p.accepted + len(p.refused)
                assert all(previous < line <= p.last_line for line, _e, _r in p.refused)
                previous = p.last_line
            assert previous == max([after, *accepted, *refused])  # the last slice reaches the file's last line


def test_a_slice_is_inserted_in_line_order_and_a_duplicate_of_the_dedup_key_is_skipped(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        topic = src.topic("items", Item, dedup=("url",))
        topic.append(Item(url="u3", n=-3))  # stored before: line 3 is a duplicate
        path = _file(tmp_path, [1, 2, 3, 5], refused=[4])
        stored = []
        with attached(src.ledger.conn, path, topic.layout) as rows:
            for piece in rows.slices(2):
                with src.ledger.atomic() as conn:
                    stored.append(TopicTable(conn, topic.layout).insert_row_file_in_current_transaction(
                        rows, piece, "2026-11-25T00:00:00.000000Z", "r1"))
        assert stored == [2, 1]
        conn = src.ledger.conn
        assert conn.execute('SELECT url, n, _run_id FROM "items" ORDER BY _id').fetchall() == [
            ("u3", -3, None), ("u1", 1, "r1"), ("u2", 2, "r1"), ("u5", 5, "r1")]
        assert conn.execute("PRAGMA database_list").fetchall()[-1][1] == "main"  # detached after the block


def test_a_partitioned_topics_rows_from_a_row_file_are_each_routed_as_an_append_routes_them(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        layout = _layout(src, partitions=3)
        with attached(src.ledger.conn, _file(tmp_path, [1, 2, 3, 4]), layout) as rows:
            (piece,) = rows.slices(10)
            with src.ledger.atomic() as conn:
                assert TopicTable(conn, layout).insert_row_file_in_current_transaction(
                    rows, piece, "2026-11-25T00:00:00.000000Z", "r") == 4
        stored = src.ledger.conn.execute('SELECT _id, url, n, _partition FROM "items" ORDER BY _id').fetchall()
        assert [(u, n) for _i, u, n, _p in stored] == [(f"u{x}", x) for x in (1, 2, 3, 4)]
        assert [p for *_r, p in stored] == [layout.route((u, n), i) for i, u, n, _p in stored]


def test_what_is_not_a_row_file_of_this_topic_is_a_staging_error_and_nothing_is_created(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        layout = _layout(src)
        conn = src.ledger.conn
        missing = tmp_path / "gone.sqlite"
        with pytest.raises(StagingError, match="gone.sqlite is missing"):
            with attached(conn, str(missing), layout):
                pass
        assert not missing.exists()
        junk = tmp_path / "junk.sqlite"
        junk.write_bytes(b"not a database at all" * 100)
        with pytest.raises(StagingError, match="junk.sqlite cannot be"):
            with attached(conn, str(junk), layout):
                pass
        other = str(tmp_path / "other.sqlite")
        write_row_file(other, 3, [("a", 1, 2)], [1], [])
        with pytest.raises(StagingError, match="not a version-1 row file of topic 'items' \\(2 fields\\)"):
            with attached(conn, other, layout):
                pass
        with attached(conn, _file(tmp_path, [1]), layout) as rows:  # each failure detached what it attached
            assert rows.rows == 1


def test_a_row_file_is_attached_only_outside_a_transaction(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        layout = _layout(src)
        path = _file(tmp_path, [1])
        with src.ledger.atomic() as conn, pytest.raises(RuntimeError, match="outside a transaction"):
            with attached(conn, path, layout):
                pass


def test_values_keep_their_storage_types(tmp_path):
    path = str(tmp_path / "t.sqlite")
    write_row_file(path, 4, [("text", 2**62, 1.5, b"\x00\x01"), (None, -1, 0.0, b"")], [1, 2], [])
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT typeof(c0), typeof(c1), typeof(c2), typeof(c3) FROM mk_rows ORDER BY seq").fetchall() \
        == [("text", "integer", "real", "blob"), ("null", "integer", "real", "blob")]


def test_a_row_file_whose_line_numbers_do_not_match_its_rows_is_refused(tmp_path):
    with pytest.raises(ValueError, match="2 rows but 1 line numbers"):
        write_row_file(str(tmp_path / "w.sqlite"), 2, [("a", 1), ("b", 2)], [1], [])
    path = _file(tmp_path, [1, 2, 3])
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM mk_rows WHERE seq = 3")  # a damaged file: a row gone, its line still listed
    conn.commit()
    conn.close()
    with Source(str(tmp_path / "l.sqlite")) as src:
        with pytest.raises(StagingError, match="holds 2 row\\(s\\) and 3 line number\\(s\\)"):
            with attached(src.ledger.conn, path, _layout(src)):
                pass

"""Backfill's commit of row files (no Spark): counts, progress, quarantine, and a failed
commit that leaves nothing half-written and nothing attached."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import InvalidRecordError
from minikafka.ledger.consuming import RunResult
from minikafka.ledger.topics import write_row_file
from minikafka.ledger.transactions import commit_slices
from minikafka.spark.loading.backfill import BackfillResult
from minikafka.spark.loading.loadcommit import row_file_slices


class Item(BaseModel):
    url: str
    n: int


def _part(tmp_path, name, rows, lines, refused=()):
    path = str(tmp_path / name)
    write_row_file(path, 2, rows, lines, list(refused))
    return path, len(rows) + len(refused)


def _commit(src, topic, parts, batch_rows=2, progress=None, **kw):
    run = RunResult("bf-1", "backfill", stage="backfill:items", outputs=[topic.name], details={})
    result = BackfillResult(run=run)
    commit_slices(src.ledger, topic.layout, "dump.jsonl", "sha", row_file_slices(src, parts, topic.layout, batch_rows, 0,
                                                                          run.run_id, **kw),
                  run, result, as_handled=False, progress=progress)
    return run, result


def _transactions(src, topic, parts, batch_rows, **kw):
    """(last line, row files attached) of each transaction the commit made."""
    ends = []

    def progress(text):
        attached = [name for _s, name, _f in src.ledger.conn.execute("PRAGMA database_list") if name != "main"]
        ends.append((int(text.split("line ")[1].split(" ")[0]), len(attached)))

    _commit(src, topic, parts, batch_rows, progress=progress, **kw)
    return ends


def test_a_transaction_spans_several_row_files_up_to_its_rows_and_files_and_detaches_what_it_committed(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        topic = src.topic("items", Item, dedup=None)
        parts = [_part(tmp_path, "a.sqlite", [("u1", 1), ("u2", 2)], [1, 2]),
                 _part(tmp_path, "b.sqlite", [("u3", 3)], [3], [(4, "bad", "raw 4")]),
                 _part(tmp_path, "c.sqlite", [("u5", 5), ("u6", 6), ("u7", 7)], [5, 6, 7]),
                 _part(tmp_path, "d.sqlite", [], [], [(8, "bad", "raw 8")])]
        # 4 rows a transaction: a, b and the first row of c; then the rest of c and d
        assert _transactions(src, topic, parts, 4) == [(5, 3), (8, 2)]
        assert [r.n for r in topic.iter_new()] == [1, 2, 3, 5, 6, 7]
        assert [name for _s, name, _f in src.ledger.conn.execute("PRAGMA database_list")] == ["main"]
    with Source(str(tmp_path / "m.sqlite")) as src:
        topic = src.topic("items", Item, dedup=None)
        assert _transactions(src, topic, parts, 100, files=2) == [(4, 2), (8, 2)]  # two files at once at most
    with Source(str(tmp_path / "n.sqlite")) as src:
        topic = src.topic("items", Item, dedup=None)
        asked = []
        # asked after each file whether to commit at once: yes after b
        ends = _transactions(src, topic, parts, 100, commit_now=lambda: asked.append(1) or len(asked) == 2)
        assert ends == [(4, 2), (8, 2)] and len(asked) == 4
        assert [r.n for r in topic.iter_new()] == [1, 2, 3, 5, 6, 7]
        assert len(src.quarantined("items")) == 2


@pytest.mark.parametrize("partitions", [1, 3])
def test_row_files_are_committed_in_line_order_with_duplicates_refused_lines_and_progress(tmp_path, partitions):
    with Source(str(tmp_path / "l.sqlite")) as src:
        topic = src.topic("items", Item, dedup=("url",), partitions=partitions)
        parts = [_part(tmp_path, "a.sqlite", [("u1", 1), ("u2", 2), ("u1", 3)], [1, 2, 4], [(3, "bad", "raw 3")]),
                 _part(tmp_path, "b.sqlite", [("u5", 5)], [5], [(6, "worse", "raw 6")])]
        run, result = _commit(src, topic, parts)
        conn = src.ledger.conn
        assert conn.execute('SELECT url, n, _run_id FROM "items" ORDER BY _id').fetchall() == [
            ("u1", 1, "bf-1"), ("u2", 2, "bf-1"), ("u5", 5, "bf-1")]
        assert (run.rows_in, run.rows_out, run.rows_duplicate, run.rows_quarantined, result.rows_read) == (6, 3, 1, 2, 6)
        assert conn.execute("SELECT origin, reason FROM _minikafka_quarantine ORDER BY id").fetchall() == [
            ("dump.jsonl:3", "bad"), ("dump.jsonl:6", "worse")]
        assert conn.execute("SELECT rows_done FROM _minikafka_loads").fetchone()[0] == 6


def test_a_failed_commit_stores_nothing_of_its_slice_and_leaves_no_row_file_attached(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        topic = src.topic("items", Item, dedup=("url",))
        good = _part(tmp_path, "good.sqlite", [("u1", 1), ("u2", 2)], [1, 2])
        bad = _part(tmp_path, "bad.sqlite", [("u3", 3), ("u4", "not an int")], [3, 4])  # the table refuses TEXT
        with pytest.raises(InvalidRecordError, match="cannot store TEXT value in INTEGER column items.n"):
            _commit(src, topic, [good, bad])
        conn = src.ledger.conn
        assert not conn.in_transaction
        assert [name for _s, name, _f in conn.execute("PRAGMA database_list")] == ["main"]
        assert conn.execute('SELECT url FROM "items"').fetchall() == [("u1",), ("u2",)]  # the first slice only
        assert conn.execute("SELECT rows_done FROM _minikafka_loads").fetchone()[0] == 2
        run, _result = _commit(src, topic, [_part(tmp_path, "next.sqlite", [("u9", 9)], [1])])  # attaches again
        assert run.rows_out == 1

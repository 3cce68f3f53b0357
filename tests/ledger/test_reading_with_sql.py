"""What docs/concepts/reading-the-ledger-with-sql.md tells SQL readers, run as written with plain sqlite3.

The page's demo script writes a small ledger; every SQL block of the page then runs on it
through the standard library's ``sqlite3`` (read-only, no minikafka code) and gives the
status the page describes. tests/spark/test_reading_the_example_ledger_with_sql.py runs
the same queries on the example pipeline's ledger after a Spark run.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from tests.util import sqldoc

ROOT = sqldoc.DOC.parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The page's demo ledger, written by running the page's Python block in a fresh process."""
    cwd = tmp_path_factory.mktemp("demo")
    [script] = sqldoc.blocks("python")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(f"file:{cwd / 'demo.sqlite'}?mode=ro", uri=True)
    yield conn
    conn.close()


def test_every_query_on_the_page_runs_on_a_read_only_ledger(demo):
    titles = sqldoc.queries()
    assert len(titles) >= 8
    for title, sql in titles.items():
        assert demo.execute(sql).fetchall(), title


def test_the_status_view_says_what_the_page_says_of_the_demo_rows(demo):
    rows = demo.execute(sqldoc.query("every row of a topic with its status")).fetchall()
    assert [(r[0], r[2]) for r in rows] == [(1, "handled"), (2, "new"), (3, "handled"), (4, "new"), (5, "new"),
                                           (6, "handled")]
    assert demo.execute(sqldoc.query("how many rows are new and handled")).fetchall() == [("handled", 3), ("new", 3)]


def test_the_consumer_view_gives_each_consumers_own_status(demo):
    rows = demo.execute(sqldoc.query("every row for every consumer")).fetchall()
    split = [i for i, c, s in rows if c == "split_youtube" and s == "handled"]
    keep = [i for i, c, s in rows if c == "keep_articles" and s == "handled"]
    assert split == [1, 2, 3, 4, 6] and keep == [1, 3, 6]  # a commit up to 4; acks of 1 and 3; 6 for everyone
    assert demo.execute(sqldoc.query("new and handled rows per consumer")).fetchall() == [
        ("keep_articles", 3, 3), ("split_youtube", 1, 5)]
    assert demo.execute(sqldoc.query("the rows one consumer has not done yet")).fetchall() == [
        (5, "https://example.org/5")]


def test_the_positions_query_reads_offsets_and_out_of_order_acks(demo):
    rows = demo.execute(sqldoc.query("where each consumer stands, without reading the rows")).fetchall()
    assert rows == [("rss.items", "keep_articles", 0, 1, 1), ("rss.items", "split_youtube", 0, 4, 0)]


def test_the_state_tables_query_agrees_with_the_consumer_view(demo):
    by_hand = demo.execute(sqldoc.query("the status for one consumer, from the state tables")).fetchall()
    view = demo.execute("SELECT _id, _status FROM \"rss.items:consumers\" WHERE consumer = 'split_youtube' "
                        "ORDER BY _id").fetchall()
    assert by_hand == view


def test_the_status_a_topic_table_used_to_carry_is_gone_so_it_cannot_lie(demo):
    with pytest.raises(sqlite3.OperationalError, match="no such column: _status"):
        demo.execute("SELECT count(*) FROM \"rss.items\" WHERE _status = 'new'")

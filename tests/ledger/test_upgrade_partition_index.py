"""Format 4 -> 5: one-partition topics lose their index on ``"_partition"``; nothing else changes.

``tests/data/ledger_format4.sqlite`` was written by minikafka at format 4
(``tests/data/make_ledger_format4.py`` says how): topic ``videos`` (1 partition, 5 rows,
group ``a`` committed up to row 2 and acked row 4) and topic ``orders`` (3 partitions, 6
rows, group ``g`` committed its first row).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.ledger.transactions import LEDGER_FORMAT
from tests.conftest import Video

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "ledger_format4.sqlite"


class Order(BaseModel):
    customer: str
    amount: int


def _indexes(path: str) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}
    finally:
        conn.close()


@pytest.fixture
def old_file(tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, path)
    return str(path)


def test_the_fixture_is_format_4_with_both_partition_indexes():
    conn = sqlite3.connect(f"file:{FIXTURE}?mode=ro", uri=True)
    assert conn.execute("SELECT value FROM _minikafka_meta WHERE key = 'format'").fetchone() == ("4",)
    conn.close()
    assert {"videos__partition", "orders__partition"} <= _indexes(str(FIXTURE))


def test_a_format_4_file_drops_the_index_of_one_partition_topics_only_and_keeps_its_state(old_file):
    with Source(old_file) as src:
        assert src.ledger.upgraded_from == 4
        videos = src.topic("videos", Video, dedup=("url",))
        assert [r.id for r in videos.iter_new(records=True, consumer="a")] == [3, 5]
        assert src.group("a").committed("videos") == 2
        orders = src.topic("orders", Order, dedup=None, partitions=3, key=("customer",))
        assert orders.count() == 6
        assert sum(src.group("g").committed("orders", p) for p in range(3)) == 1
    names = _indexes(old_file)
    assert "videos__partition" not in names and "orders__partition" in names
    assert "videos__dedup" in names
    conn = sqlite3.connect(old_file)
    assert conn.execute("SELECT value FROM _minikafka_meta WHERE key = 'format'").fetchone() == (str(LEDGER_FORMAT),)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    with Source(old_file) as src:  # a second open finds nothing left to upgrade
        assert src.ledger.upgraded_from is None
        videos = src.topic("videos", Video, dedup=("url",))
        videos.append(Video(creator="c", url="https://v/6", length_seconds=6))
        assert [r.id for r in videos.iter_new(records=True, consumer="a")] == [3, 5, 6]


def test_new_topics_index_the_partition_only_when_they_have_several(db_path):
    with Source(db_path) as src:
        src.topic("videos", Video, dedup=("url",))
        src.topic("orders", Order, dedup=None, partitions=3, key=("customer",))
    names = _indexes(db_path)
    assert "videos__partition" not in names and "orders__partition" in names


def test_reads_of_a_one_partition_topic_stay_on_the_id_without_the_index(db_path):
    """The lookups the ack code makes per partition use the rowid, not a scan of the table."""
    with Source(db_path) as src:
        src.topic("videos", Video, dedup=("url",))
        conn = src.ledger.conn
        for sql in ('SELECT max("_id") FROM "videos" WHERE "_partition" = 0',
                    'SELECT min("_id") FROM "videos" WHERE "_partition" = 0 AND "_id" > 5'):
            plan = " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
            assert "SCAN" not in plan, (sql, plan)

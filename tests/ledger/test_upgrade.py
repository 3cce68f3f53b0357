"""A ledger written by the first format opens, is upgraded once, and keeps its ack state.

``tests/data/ledger_format1.sqlite`` was written by minikafka before partitions: topic
``videos`` (5 rows), consumers ``a`` (acked rows 1-3) and ``b`` (acked row 1).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.ledger.schema import LEDGER_FORMAT
from tests.conftest import Video

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "ledger_format1.sqlite"


@pytest.fixture
def old_file(tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, path)
    return str(path)


def test_a_format_1_file_opens_upgraded_with_its_state_intact(old_file):
    with Source(old_file) as src:
        videos = src.topic("videos", Video, dedup=("url",))
        assert videos.partitions == 1
        assert videos.count("new", consumer="a") == 2 and videos.count("new", consumer="b") == 4
        assert videos.count("handled") == 1 and videos.consumers() == ["a", "b"]
        assert [r.partition for r in videos.iter_new(records=True)] == [0, 0, 0, 0]
    conn = sqlite3.connect(old_file)
    assert conn.execute("SELECT value FROM _minikafka_meta WHERE key = 'format'").fetchone() == (str(LEDGER_FORMAT),)
    assert "_partition" in {r[1] for r in conn.execute('PRAGMA table_info("videos")')}
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'videos__partition'").fetchone() == (1,)


def test_an_upgraded_file_keeps_working_for_appends_acks_and_groups(old_file):
    with Source(old_file) as src:
        videos = src.topic("videos", Video, dedup=("url",))
        videos.append({"creator": "c", "url": "u5", "length_seconds": 5})
        for rec in videos.iter_new(records=True, consumer="b"):
            rec.ack()
        for rec in videos.iter_new(records=True, consumer="a"):
            rec.ack()
        assert videos.count("handled") == 6
        assert src._ledger.conn.execute("SELECT count(*) FROM _minikafka_acks").fetchone() == (0,)
        group = src.group("g")
        assert [r.offset for r in group.fetch(videos, 0, 2)] == [1, 2]
        group.commit(videos, 0, 6)
    with Source(old_file) as src:  # a second open finds nothing left to upgrade
        assert src.group("g").committed("videos", 0) == 6

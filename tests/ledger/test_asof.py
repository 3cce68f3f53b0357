"""Reads as of a snapshot (ledger/topics/asof.py): every topic's high-water mark in one read, and
a keyed table's rows current as of an id, not as of now."""

from __future__ import annotations

from datetime import date

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import InvalidSettingError
from minikafka.ledger.topics import asof


class Daily(BaseModel):
    carrier: str
    day: date
    n: int


class Airline(BaseModel):
    carrier: str
    name: str


def rows_of(src: Source, name: str, upto: int, which: str) -> list[tuple]:
    conn = src.ledger.conn
    query = asof.subquery(conn, src.layout(name), upto, which)
    return conn.execute(f"SELECT * FROM {query} ORDER BY 1").fetchall()


def test_high_waters_name_every_topic_and_table_with_zero_for_an_empty_one(db_path):
    with Source(db_path) as src:
        src.topic("airlines", Airline, dedup=("carrier",)).extend([{"carrier": "AA", "name": "American"}])
        src.topic("empty", Airline, dedup=None)
        src.table("daily", Daily, key=("carrier", "day")).upsert({"carrier": "AA", "day": date(2024, 1, 1), "n": 1})
        assert asof.high_waters(src.ledger.conn) == {"airlines": 1, "daily": 1, "empty": 0}


def test_current_as_of_an_id_keeps_a_version_superseded_only_after_it(db_path):
    with Source(db_path) as src:
        daily = src.table("daily", Daily, key=("carrier", "day"))
        day = date(2024, 1, 1)
        daily.upsert({"carrier": "AA", "day": day, "n": 1})   # id 1
        daily.upsert({"carrier": "UA", "day": day, "n": 5})   # id 2
        daily.upsert({"carrier": "AA", "day": day, "n": 2})   # id 3 supersedes 1
        assert [r[0] for r in rows_of(src, "daily", 2, "current")] == [1, 2]  # 1 was still current at id 2
        assert [r[0] for r in rows_of(src, "daily", 3, "current")] == [2, 3]
        assert [r[0] for r in rows_of(src, "daily", 3, "all")] == [1, 2, 3]
        assert rows_of(src, "daily", 3, "current")[1] == (3, "AA", "2024-01-01", 2)  # _id, then the fields


def test_current_of_a_plain_topic_or_an_unknown_which_is_refused(db_path):
    with Source(db_path) as src:
        src.topic("airlines", Airline, dedup=None)
        with pytest.raises(InvalidSettingError, match="'airlines' is not a keyed table"):
            asof.where(src.ledger.conn, src.layout("airlines"), 1, "current")
        with pytest.raises(InvalidSettingError, match="which must be one of"):
            asof.where(src.ledger.conn, src.layout("airlines"), 1, "new")

"""Iceberg tables whose catalog lives in the ledger: the pointer swap commits with the stage."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

pytest.importorskip("pyiceberg")
pytest.importorskip("duckdb")

from minikafka import ConcurrentRunError, LakeConfigError, Source  # noqa: E402
from minikafka.ledger.consuming import RunResult  # noqa: E402
from minikafka.ledger.lake import (  # noqa: E402
    IcebergTarget,
    declare,
    finishers_for,
    orphan_files,
    reader_catalog,
    remove_orphans,
    sync,
)
from minikafka.ledger.transactions import commit_stage  # noqa: E402

from .lake_writer import Item, add_rows, copy_pending, make_ledger  # noqa: E402
from .readers import read_three_ways  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


class Color(enum.Enum):
    red = "red"
    blue = "blue"


class Level(enum.IntEnum):
    low = 1
    high = 2


class Inner(BaseModel):
    a: int


class Wide(BaseModel):
    url: str
    n: int
    score: float
    ok: bool
    at: dt.datetime
    day: dt.date
    price: decimal.Decimal
    color: Color
    level: Level
    tags: list[str]
    inner: Inner
    blob: bytes
    note: str | None = None


def wide_rows(count: int) -> list[dict]:
    return [dict(url=f"u{i}", n=(-1) ** i * (2**62 + i), score=i / 3, ok=i % 2 == 0,
                 at=dt.datetime(2024, 1, 1 + i % 3, 12, 0, 0, 123456 + i, tzinfo=dt.UTC),
                 day=dt.date(2024, 1, 1 + i % 3), price=decimal.Decimal("12345678901234567.000000000000000001") * i,
                 color="red" if i % 2 else "blue", level=1 + i % 2, tags=["a", str(i)], inner={"a": i},
                 blob=bytes([i % 256, 0, 255]), note=None if i % 2 else f"note {i}")
            for i in range(count)]


def ledger_rows(path: str, topic: str, model, dedup) -> list[tuple]:
    """The topic's committed rows as the lake holds them: ``_id``, then each field (enums as
    their value, nested values as the JSON text the ledger stores)."""
    with Source(path) as source:
        records = list(source.topic(topic, model, dedup=dedup).iter_new(records=True)) + \
            list(source.topic(topic, model, dedup=dedup).iter_handled(records=True))
    rows = []
    for r in records:
        values = []
        for name, value in r.data:
            if isinstance(value, enum.Enum):
                value = value.value
            elif isinstance(value, BaseModel | list | dict):
                value = json.dumps(value.model_dump(mode="json") if isinstance(value, BaseModel) else value,
                                   separators=(",", ":"))
            values.append(value)
        rows.append((r.id, *values))
    return sorted(rows)


def test_types_are_exact_and_duckdb_polars_and_pyiceberg_read_back_the_same_rows_and_types(tmp_path):
    ledger = str(tmp_path / "l.db")
    with Source(ledger) as source:
        source.topic("wide", Wide, dedup=("url",)).extend(wide_rows(7))
        target = IcebergTarget("wide", "wide", str(tmp_path / "lake" / "wide"), partition_by=("day(at)", "color"))
        declare(source.ledger, [target])
        result = sync(source.ledger, target)
    assert result.rows == 7 and result.last_id == 7
    schema = reader_catalog(ledger).load_table("minikafka.wide").schema()
    assert [(f.name, str(f.field_type), f.required) for f in schema.fields] == [
        ("_id", "long", True), ("url", "string", True), ("n", "long", True), ("score", "double", True),
        ("ok", "boolean", True), ("at", "timestamptz", True), ("day", "date", True),
        ("price", "decimal(38, 18)", True), ("color", "string", True), ("level", "long", True),
        ("tags", "string", True), ("inner", "string", True), ("blob", "binary", True), ("note", "string", False)]
    read = read_three_ways(ledger, "wide")
    expected = ledger_rows(ledger, "wide", Wide, ("url",))
    for name, (rows, types) in read.items():
        assert rows == expected, name
        assert types == read["pyiceberg"][1], name
    assert dict(read["pyiceberg"][1])["at"] == "timestamp[us, tz=UTC]"
    assert dict(read["pyiceberg"][1])["price"] == "decimal128(38, 18)"

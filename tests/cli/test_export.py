"""to_arrow / to_pandas."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pytest
from pydantic import BaseModel


class Row(BaseModel):
    n: int
    when: datetime
    price: Decimal
    tags: list[str]
    note: str | None = None


def test_to_arrow_types_and_metadata(source):
    t = source.topic("rows", Row, dedup=None)
    t.extend([
        {"n": 2**40, "when": datetime(2024, 1, 1, 0, 0, 0, 5, tzinfo=timezone.utc), "price": "1.25", "tags": ["a"]},
        {"n": -1, "when": datetime(2024, 1, 2, tzinfo=timezone.utc), "price": "2", "tags": []},
    ])
    t.set_handled(2)
    table = t.to_arrow()
    assert table.column_names[:3] == ["_id", "_created_at", "_status"]
    assert table.schema.field("n").type == pa.int64()
    assert table.schema.field("when").type == pa.timestamp("us", tz="UTC")
    assert table.column("n").to_pylist() == [2**40, -1]
    assert table.column("when")[0].as_py().microsecond == 5
    assert table.column("tags").to_pylist() == [["a"], []]
    assert t.to_arrow("new").num_rows == 1


def test_to_pandas(source):
    pytest.importorskip("pandas")
    t = source.topic("rows", Row, dedup=None)
    t.append({"n": 1, "when": datetime(2024, 1, 1, tzinfo=timezone.utc), "price": "1", "tags": []})
    df = t.to_pandas()
    assert list(df["n"]) == [1] and df["_status"][0] == "new"

"""A stage added after another stage handled every row: start='earliest' processes every row, 'latest' none.

(Before format 3 such a stage started from what was still 'new', read rows_in=0 and
reported success.)
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from pyspark.sql import functions as F

from minikafka import Source
from minikafka.spark import Stage, run_stage

pytestmark = pytest.mark.spark


class Item(BaseModel):
    url: str
    n: int


class Copy(BaseModel):
    url: str
    n: int


def copy(df):
    return df.select("_id", "url", F.col("n").cast("long").alias("n"))


def test_a_stage_added_later_processes_every_row_or_with_start_latest_only_new_ones(spark, tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        items = src.topic("items", Item, dedup=("url",))
        for name in ("first", "second", "tail"):
            src.topic(name, Copy, dedup=("url",))
        items.extend([{"url": f"u{i}", "n": i} for i in range(6)])
        assert run_stage(spark, src, Stage("first", ["items"], ["first"], transform=copy)).rows_in == 6
        assert items.count("new") == 0  # every consumer registered so far is past every row

        second = run_stage(spark, src, Stage("second", ["items"], ["second"], transform=copy))
        assert (second.status, second.rows_in, second.rows_out) == ("succeeded", 6, 6)

        tail = Stage("tail", ["items"], ["tail"], transform=copy, start="latest")
        assert run_stage(spark, src, tail).rows_in == 0
        items.extend([{"url": "u6", "n": 6}])
        again = run_stage(spark, src, tail)
        assert (again.rows_in, again.rows_out) == (1, 1)
        assert [r.url for r in src.topic("tail", Copy, dedup=("url",)).iter_new()] == ["u6"]

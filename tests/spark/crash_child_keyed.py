"""A stage writing into a keyed table, run in its own process for the SIGKILL tests
(test_keyed_crash.py)."""

from __future__ import annotations

import sys

from pydantic import BaseModel
from pyspark.sql import functions as F

from minikafka import Source
from minikafka.spark import Stage, build_session, run_stage


class Item(BaseModel):
    url: str
    n: int


class Bucket(BaseModel):
    bucket: int
    total: int
    rows: int
    last_url: str


def stage() -> Stage:
    return Stage("buckets", ["items"], ["buckets"],
                 transform=lambda df: df.select("_id", (F.col("n") % 7).alias("bucket"), F.col("n").alias("total"),
                                                F.lit(1).alias("rows"), F.col("url").alias("last_url")))


def open_topics(src: Source) -> None:
    src.topic("items", Item, dedup=("url",))
    src.table("buckets", Bucket, key=("bucket",), merge={"total": "sum", "rows": "sum", "last_url": "max"})


if __name__ == "__main__":
    spark = build_session(master="local[1]", testing=True)
    with Source(sys.argv[1]) as src:
        open_topics(src)
        print(run_stage(spark, src, stage()).status, flush=True)

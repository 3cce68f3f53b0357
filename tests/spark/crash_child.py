"""A stage run in its own process, for the SIGKILL tests (see test_crash.py); with a second
argument (``sc://HOST:PORT``) the process is a client of that engine."""

from __future__ import annotations

import sys

from pydantic import BaseModel
from pyspark.sql import functions as F

from minikafka import Source
from minikafka.spark import Stage, build_session, run_stage


class Item(BaseModel):
    url: str
    n: int


class Doubled(BaseModel):
    url: str
    n2: int


def stage() -> Stage:
    return Stage("double", ["items"], ["doubled"],
                 transform=lambda df: df.select("_id", "url", (F.col("n") * 2).alias("n2")))


def open_topics(src: Source) -> None:
    src.topic("items", Item, dedup=("url",))
    src.topic("doubled", Doubled, dedup=None)  # no dedup: a double commit would show as duplicate rows


if __name__ == "__main__":
    if len(sys.argv) > 2:  # a client of the engine at sys.argv[2]
        from minikafka.spark.engine import connect

        spark = connect(sys.argv[2], conf={"spark.sql.shuffle.partitions": "2"})
    else:
        spark = build_session(master="local[1]", testing=True)
    with Source(sys.argv[1]) as src:
        open_topics(src)
        print(run_stage(spark, src, stage()).status, flush=True)

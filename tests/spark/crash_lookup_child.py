"""A stage with lookups (a plain topic and a keyed table) run in its own process, for the
SIGKILL tests of lookups (test_crash_lookup.py); ``sys.argv[2]``: an engine to be a client of."""

from __future__ import annotations

import sys

from pydantic import BaseModel

from minikafka import Source
from minikafka.spark import Stage, build_session, run_stage


class Item(BaseModel):
    url: str
    n: int


class Label(BaseModel):
    n: int
    label: str


class Labelled(BaseModel):
    url: str
    label: str | None = None
    weight: str | None = None


def join(frames):
    items = frames["items"]
    labels = frames["labels"]
    weights = frames["weights"].withColumnRenamed("label", "weight")
    return (items.join(labels, "n", "left").join(weights, "n", "left")
            .select("_id", "url", "label", "weight"))


def stage() -> Stage:
    return Stage("label", ["items"], ["labelled"], transform=join, lookups=["labels", "weights"])


def open_topics(src: Source) -> None:
    src.topic("items", Item, dedup=("url",))
    src.topic("labels", Label, dedup=("n",))
    src.table("weights", Label, key="n")
    src.topic("labelled", Labelled, dedup=None)  # no dedup: a double commit would show as duplicate rows


if __name__ == "__main__":
    if len(sys.argv) > 2:
        from minikafka.spark.engine import connect

        spark = connect(sys.argv[2], conf={"spark.sql.shuffle.partitions": "2"})
    else:
        spark = build_session(master="local[1]", testing=True)
    with Source(sys.argv[1]) as src:
        open_topics(src)
        print(run_stage(spark, src, stage()).status, flush=True)

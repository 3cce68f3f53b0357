"""Spark and partitions: partition-parallel reads, stages that consume chosen partitions, one ack model."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from pyspark.sql import functions as F

from minikafka import Source
from minikafka.spark import Stage, read_topic, run_stage

pytestmark = pytest.mark.spark


class Order(BaseModel):
    user: str
    n: int


class Doubled(BaseModel):
    user: str
    n2: int


def double(df):
    return df.select("_id", "user", (F.col("n") * 2).alias("n2"))


@pytest.fixture
def ledger(tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        orders = src.topic("orders", Order, dedup=None, partitions=3, key=("user",))
        orders.extend([{"user": f"user-{i % 7}", "n": i} for i in range(60)])
        src.topic("doubled", Doubled, dedup=None)
        yield src


def test_a_partitioned_topic_is_read_one_spark_partition_per_topic_partition(spark, ledger):
    df = read_topic(spark, ledger, "orders", which="all")
    assert df.rdd.getNumPartitions() == 3 and df.count() == 60
    only = read_topic(spark, ledger, "orders", which="all", topic_partitions=[1])
    expected = sorted(r.id for r in ledger.topic("orders", Order, dedup=None).iter_new(records=True) if r.partition == 1)
    assert sorted(r["_id"] for r in only.select("_id").collect()) == expected


def test_two_runs_given_disjoint_partitions_split_the_work_without_overlap(spark, ledger):
    first = run_stage(spark, ledger, Stage("double", ["orders"], ["doubled"], transform=double, topic_partitions=[0]))
    second = run_stage(spark, ledger, Stage("double", ["orders"], ["doubled"], transform=double,
                                            topic_partitions=[1, 2]))
    assert first.rows_in + second.rows_in == 60 and first.rows_in > 0 and second.rows_in > 0
    parents = [r.parent_id for r in ledger.topic("doubled", Doubled, dedup=None).iter_new(records=True)]
    assert sorted(parents) == list(range(1, 61))  # every row once
    assert ledger.topic("orders", Order, dedup=None).count("new", consumer="double") == 0


def test_a_stage_consuming_as_g_and_group_g_see_the_same_offsets(spark, ledger):
    group = ledger.group("double")
    group.commit("orders", 0, group.fetch("orders", 0, 5)[-1].offset)
    before = group.lag("orders")
    result = run_stage(spark, ledger, Stage("double", ["orders"], ["doubled"], transform=double))
    assert result.rows_in == sum(before.values())  # the stage skipped what the group had committed
    orders = ledger.topic("orders", Order, dedup=None)
    # the stage committed its high-watermark in every partition: a position, like any offset
    assert {p: group.committed(orders, p) for p in range(3)} == {p: result.watermarks["orders"] for p in range(3)}
    assert group.lag(orders) == {0: 0, 1: 0, 2: 0} and group.fetch(orders, 1) == []

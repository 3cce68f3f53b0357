"""JDBC reads of topics: every ledger type round-trips exactly; watermarks bound the read."""

from __future__ import annotations

import enum
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
from chispa import assert_df_equality
from pydantic import BaseModel, Field
from pyspark.sql import types as T

from minikafka import Source
from minikafka.spark import read_topic

pytestmark = pytest.mark.spark


class Color(str, enum.Enum):
    red = "red"
    blue = "blue"


class Inner(BaseModel):
    name: str
    score: float | None = None


class AllTypes(BaseModel):
    big: int
    real: float
    text: str
    flag: bool
    at: datetime
    day: date
    money: Decimal = Field(max_digits=30, decimal_places=9)
    color: Color
    maybe: int | None
    inner: Inner
    tags: list[str]
    nested: list[Inner]
    attrs: dict[str, int]


EDGE_ROWS = [
    dict(big=2**63 - 1, real=1.5e308, text="", flag=True, at=datetime(1970, 1, 1, tzinfo=timezone.utc),
         day=date(1970, 1, 1), money=Decimal("123456789012345678901.123456789"), color="red", maybe=None,
         inner={"name": "ünïcødé ✓", "score": None}, tags=[], nested=[], attrs={}),
    dict(big=-(2**63), real=-0.0, text="🚀 multi\nline\ttext 'quoted' \"double\"", flag=False,
         at=datetime(2038, 1, 19, 3, 14, 8, 123456, tzinfo=timezone.utc), day=date(2999, 12, 31),
         money=Decimal("-0.000000001"), color="blue", maybe=2**31 + 7,
         inner={"name": "x", "score": 2.5}, tags=["a", "b"], nested=[{"name": "n", "score": 1.0}],
         attrs={"k": 2**40}),
    dict(big=2**31, real=3.0, text="plain", flag=True, at=datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=timezone.utc),
         day=date(2024, 2, 29), money=Decimal("0"), color="red", maybe=-1,
         inner={"name": "", "score": None}, tags=[""], nested=[{"name": "a"}, {"name": "b", "score": -1.0}],
         attrs={"a": -1, "b": 0}),
]


@pytest.fixture
def ledger(tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        yield src


def test_every_type_round_trips_through_jdbc(any_spark, ledger):
    spark = any_spark
    topic = ledger.topic("all_types", AllTypes, dedup=None)
    topic.extend(EDGE_ROWS)
    df = read_topic(spark, ledger, "all_types", which="all")
    types = {f.name: f.dataType for f in df.schema.fields}
    assert types["big"] == T.LongType() and types["maybe"] == T.LongType()
    assert types["at"] == T.TimestampType() and types["day"] == T.DateType()
    assert types["money"] == T.DecimalType(30, 9)
    assert isinstance(types["inner"], T.StructType) and isinstance(types["nested"], T.ArrayType)
    assert isinstance(types["attrs"], T.MapType)
    rows = sorted(df.collect(), key=lambda r: r["_id"])
    for row, expected in zip(rows, EDGE_ROWS):
        model = AllTypes.model_validate(expected)
        back = AllTypes.model_validate({
            **row.asDict(recursive=True),
            "at": row["at"].replace(tzinfo=timezone.utc),
        })
        assert back == model


def test_int64_values_above_two_to_the_31_are_not_truncated(spark, ledger):
    class N(BaseModel):
        n: int

    t = ledger.topic("n", N, dedup=None)
    values = [2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, -(2**63)]
    t.extend([{"n": v} for v in values])
    got = [r["n"] for r in read_topic(spark, ledger, "n").orderBy("_id").collect()]
    assert got == values


def test_new_handled_and_all_with_consumers(spark, ledger):
    class N(BaseModel):
        n: int

    t = ledger.topic("n", N, dedup=None)
    t.extend([{"n": i} for i in range(6)])
    t.consumer("a")
    t.consumer("b")
    for rec in t.iter_new(records=True, consumer="a"):
        if rec.id <= 4:
            rec.ack()
    ids = lambda df: sorted(r["_id"] for r in df.select("_id").collect())  # noqa: E731
    assert ids(read_topic(spark, ledger, "n", which="new", consumer="a")) == [5, 6]
    assert ids(read_topic(spark, ledger, "n", which="handled", consumer="a")) == [1, 2, 3, 4]
    assert ids(read_topic(spark, ledger, "n", which="new", consumer="b")) == [1, 2, 3, 4, 5, 6]
    assert ids(read_topic(spark, ledger, "n", which="all")) == [1, 2, 3, 4, 5, 6]


def test_high_watermark_hides_rows_appended_after_it_across_partitions(spark, ledger):
    class N(BaseModel):
        n: int

    t = ledger.topic("n", N, dedup=None)
    t.extend([{"n": i} for i in range(1000)])
    upto = t.high_watermark()
    df = read_topic(spark, ledger, "n", upto=upto, partitions=4)
    assert df.rdd.getNumPartitions() == 4
    t.extend([{"n": i} for i in range(500)])  # appended while the "stage" runs
    assert df.count() == 1000 and df.agg({"_id": "max"}).collect()[0][0] == upto


def test_to_spark_matches_to_arrow(spark, ledger):
    class N(BaseModel):
        n: int
        s: str

    t = ledger.topic("n", N, dedup=None)
    t.extend([{"n": 1, "s": "a"}, {"n": 2, "s": "b"}])
    expected = spark.createDataFrame([(1, "a"), (2, "b")], "n long, s string")
    assert_df_equality(t.to_spark(spark).select("n", "s"), expected, ignore_row_order=True,
                       ignore_metadata=True, ignore_nullable=True)


def test_a_large_read_starts_with_small_id_ranges_and_gives_every_row_once_in_id_order(any_spark, ledger, monkeypatch):
    from pyspark.sql import functions as F

    from minikafka.spark.stages import read

    class N(BaseModel):
        n: int

    ledger.topic("n", N, dedup=None).extend([{"n": i} for i in range(1000)])
    monkeypatch.setattr(read, "ROWS_PER_PARTITION", 100)  # as 100,000-row partitions of a 1,000,000-row read
    rows = read_topic(any_spark, ledger, "n").select("_id", F.spark_partition_id().alias("part")).collect()
    ids = [r["_id"] for r in rows]
    assert sorted(ids) == list(range(1, 1001))
    by_id = [r["part"] for r in sorted(rows, key=lambda r: r["_id"])]
    assert by_id == sorted(by_id)  # each partition an id range, in id order
    sizes = [by_id.count(p) for p in sorted(set(by_id))]
    assert sizes[0] < sizes[-1] and sizes[0] <= sizes[1] <= sizes[2] <= sizes[3]


def test_id_cuts_split_the_first_of_n_equal_ranges_into_a_quarter_a_quarter_and_a_half():
    from minikafka.spark.stages.read import id_cuts

    assert id_cuts(1, 1001, 4) == [63, 126, 251, 501, 751]
    assert id_cuts(1, 3, 2) == [2]  # too few ids for the small ranges: each cut once, none at an end

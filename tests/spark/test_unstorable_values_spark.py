"""Spark stages and backfill quarantine values the ledger refuses, with append's reason.

Never a "NaN"/"Infinity" string inside JSON, never NULL for a NaN float, never a
rounded or overflowed decimal.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal

import pytest
from pydantic import BaseModel, Field
from pyspark.sql import functions as F

from minikafka import Source
from minikafka.spark import Stage, run_stage
from minikafka.spark.loading.backfill import backfill

pytestmark = pytest.mark.spark


class Item(BaseModel):
    key: str
    value: float


class Inner(BaseModel):
    ratio: float


class Out(BaseModel):
    key: str
    scores: list[float]
    meta: dict[str, float]
    inner: Inner
    level: float | None = None


class Priced(BaseModel):
    key: str
    amount: Decimal = Field(max_digits=12, decimal_places=4)


class Row(BaseModel):  # module level: executors import it (a local class would pickle the test's locals)
    key: str
    scores: list[float]
    amount: Decimal = Decimal(0)


@pytest.fixture
def ledger(tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        src.topic("items", Item, dedup=("key",)).extend([
            {"key": "ok", "value": 1.5}, {"key": "inf", "value": math.inf}, {"key": "nan-map", "value": 2.0},
            {"key": "nan-struct", "value": 3.0}, {"key": "nan-level", "value": 4.0}])
        src.topic("out", Out, dedup=("key",))
        src.topic("priced", Priced, dedup=("key",))
        yield src


def nan_when(key: str):
    return F.when(F.col("key") == key, F.lit(float("nan"))).otherwise(F.lit(0.5))


def shape(df):
    return df.select(
        "_id", "key", F.array(F.lit(0.0), F.col("value")).alias("scores"),
        F.create_map(F.lit("ok"), F.lit(1.0), F.lit("ratio"), nan_when("nan-map")).alias("meta"),
        F.struct(nan_when("nan-struct").alias("ratio")).alias("inner"),
        nan_when("nan-level").alias("level"))


def test_spark_stage_quarantines_nan_in_a_json_field_instead_of_writing_a_string(spark, ledger):
    result = run_stage(spark, ledger, Stage("shape", ["items"], ["out"], transform=shape))
    assert (result.status, result.rows_out, result.rows_quarantined) == ("succeeded", 1, 4)
    stored = list(ledger.topic("out", Out, dedup=("key",)).iter_new())  # reads back through the model
    assert [(m.key, m.scores, m.meta) for m in stored] == [("ok", [0.0, 1.5], {"ok": 1.0, "ratio": 0.5})]
    reasons = {json.loads(q["payload"])["key"]: q["reason"] for q in ledger.quarantined("out")}
    assert reasons["inf"].startswith("topic 'out', field 'scores': scores[1] is Infinity: JSON has no NaN")
    assert "field 'meta': meta.ratio is NaN" in reasons["nan-map"]
    assert "field 'inner': inner.ratio is NaN" in reasons["nan-struct"]
    # a NaN float column is refused as append refuses it, not stored as NULL
    assert reasons["nan-level"] == "topic 'out', field 'level': value NaN: SQLite stores NaN as NULL, so it is refused"
    assert {q["row_id"] for q in ledger.quarantined("out")} == {2, 3, 4, 5}
    assert ledger.topic("items", Item, dedup=("key",)).count("new") == 0


def test_spark_stage_quarantines_a_decimal_its_column_cannot_hold(spark, ledger):
    def price(df):
        amount = (F.when(F.col("key") == "ok", F.lit(Decimal("12345678.1234")))
                  .when(F.col("key") == "inf", F.lit(Decimal("123456789.5")))  # 9 digits before the point
                  .otherwise(F.lit(Decimal("1.123456"))))  # would be rounded to 4 places
        return df.where(F.col("key").isin("ok", "inf", "nan-map")).select("_id", "key", amount.alias("amount"))

    result = run_stage(spark, ledger, Stage("price", ["items"], ["priced"], transform=price))
    assert (result.rows_out, result.rows_quarantined) == (1, 2)
    assert [m.amount for m in ledger.topic("priced", Priced, dedup=("key",)).iter_new()] == [Decimal("12345678.1234")]
    reasons = {json.loads(q["payload"])["key"]: q["reason"] for q in ledger.quarantined("priced")}
    assert "field 'amount': value 123456789.500000 does not fit the column's decimal(12, 4)" in reasons["inf"]
    assert "value 1.123456 does not fit" in reasons["nan-map"]


def test_backfill_quarantines_nan_inside_a_json_field_and_an_oversized_decimal(spark, ledger, tmp_path):
    ledger.topic("rows", Row, dedup=("key",))
    dump = tmp_path / "dump.jsonl"
    dump.write_text('{"key": "a", "scores": [1.0]}\n{"key": "b", "scores": [1.0, NaN]}\n'
                    '{"key": "c", "scores": [], "amount": "1E+400"}\n')
    result = backfill(spark, ledger, "rows", [str(dump)], model=Row, progress=None)
    assert (result.run.rows_out, result.run.rows_quarantined) == (1, 2)
    assert [m.key for m in ledger.topic("rows", Row, dedup=("key",)).iter_new()] == ["a"]
    reasons = {q["origin"]: q["reason"] for q in ledger.quarantined("rows")}
    assert "field 'scores': scores[1] is NaN" in reasons["dump.jsonl:2"]
    assert "value 1E+400 does not fit" in reasons["dump.jsonl:3"]

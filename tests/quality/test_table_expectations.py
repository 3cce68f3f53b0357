"""Suites see exactly the topic's columns (the model's fields, in order), on a real SparkSession."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from pyspark.sql import functions as F

from minikafka import Source
from minikafka.quality import load_suite
from minikafka.spark import Stage, run_stage

pytestmark = pytest.mark.spark

FIELDS = ["url", "n", "label", "note"]


class Item(BaseModel):
    url: str
    n: int


class Out(BaseModel):
    url: str
    n: int
    label: str
    note: str | None = None  # never produced by the transform: the suite sees it as a null column


TABLE_CHECKS = (
    '[[expect]]\ntype = "expect_table_columns_to_match_set"\ncolumn_set = ["url", "n", "label", "note"]\n'
    'exact_match = true\n'
    '[[expect]]\ntype = "expect_table_columns_to_match_ordered_list"\ncolumn_list = ["url", "n", "label", "note"]\n'
    '[[expect]]\ntype = "expect_table_column_count_to_equal"\nvalue = 4\n'
)


@pytest.fixture
def ledger(tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        src.topic("items", Item, dedup=("url",)).extend([
            {"url": "https://ok/1", "n": 1}, {"url": "http://insecure/2", "n": 2}, {"url": "https://ok/3", "n": 3}])
        src.topic("out", Out, dedup=("url",))
        yield src


def shuffled(df):
    """Columns out of the model's order, plus the input's metadata the transform kept."""
    return df.select("_id", "_created_at", F.lit("a").alias("label"), "n", "url")


def suite(tmp_path, policy: str, text: str):
    path = tmp_path / f"{policy}.toml"
    path.write_text(f'policy = "{policy}"\n' + text)
    return load_suite(path, fields={"out": FIELDS}, topic="out")


def run(spark, ledger, *suites):
    return run_stage(spark, ledger, Stage("label", ["items"], ["out"], transform=shuffled, suites=list(suites)))


def test_table_columns_expectation_passes_on_correct_data(spark, ledger, tmp_path):
    result = run(spark, ledger, suite(tmp_path, "fail", TABLE_CHECKS))
    assert result.status == "succeeded" and result.rows_out == 3
    checks = {r["expectation"]: r for r in result.quality["suites"][0]["results"]}
    assert all(r["success"] for r in checks.values()), checks
    assert checks["expect_table_columns_to_match_ordered_list"]["observed_value"] == FIELDS
    assert ledger.topic("out", Out, dedup=("url",)).count() == 3


def test_column_count_expectation_sees_only_model_fields(spark, ledger, tmp_path):
    wrong = ('[[expect]]\ntype = "expect_table_column_count_to_equal"\nvalue = 5\n'
             '[[expect]]\ntype = "expect_column_to_exist"\ncolumn = "note"\n')
    result = run(spark, ledger, suite(tmp_path, "warn", wrong))
    count, note = result.quality["suites"][0]["results"]
    assert count["success"] is False and count["observed_value"] == 4  # no _id, _created_at, row key
    assert note["success"] is True  # the optional field the transform left out is there, as nulls
    stored = ledger.runs()[0]["quality"]["suites"][0]["results"][0]
    assert stored["observed_value"] == 4


def test_failing_rows_still_go_to_quarantine_without_row_key_column(spark, ledger, tmp_path):
    checks = TABLE_CHECKS + '[[expect]]\ntype = "expect_column_values_to_match_regex"\ncolumn = "url"\nregex = "^https://"\n'
    result = run(spark, ledger, suite(tmp_path, "quarantine", checks))
    assert (result.status, result.rows_out, result.rows_quarantined) == ("succeeded", 2, 1)
    results = result.quality["suites"][0]["results"]
    assert [r["success"] for r in results] == [True, True, True, False]
    assert results[3]["unexpected_count"] == 1
    out = ledger.topic("out", Out, dedup=("url",))
    assert sorted(o.url for o in out.iter_new()) == ["https://ok/1", "https://ok/3"]
    (q,) = ledger.quarantined("out")
    assert q["reason"] == "failed expectation: expect_column_values_to_match_regex(url)"
    assert q["row_id"] == 2 and '"url":"http://insecure/2"' in q["payload"] and "_mk_row" not in q["payload"]


def labelled(item: Item) -> Out:
    return Out(url=item.url, n=item.n, label="a")


def test_row_function_output_is_checked_on_model_fields_and_failing_rows_quarantined(spark, ledger, tmp_path):
    checks = TABLE_CHECKS + '[[expect]]\ntype = "expect_column_values_to_be_between"\ncolumn = "n"\nmax_value = 2\n'
    stage = Stage("label", ["items"], ["out"], row_fn=labelled, suites=[suite(tmp_path, "quarantine", checks)])
    result = run_stage(spark, ledger, stage)
    assert (result.status, result.rows_out, result.rows_quarantined) == ("succeeded", 2, 1)
    assert all(r["success"] for r in result.quality["suites"][0]["results"][:3])  # no _parent_id, _mk_error
    (q,) = ledger.quarantined("out")
    assert q["reason"] == "failed expectation: expect_column_values_to_be_between(n)" and '"n":3' in q["payload"]
    assert sorted(o.n for o in ledger.topic("out", Out, dedup=("url",)).iter_new()) == [1, 2]

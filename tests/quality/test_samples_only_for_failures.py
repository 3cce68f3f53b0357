"""A suite's results are those of one great-expectations validation with samples, though
the samples of failing values are only asked of Spark for expectations that have some."""

from __future__ import annotations

import pytest

from minikafka.quality import load_suite
from minikafka.quality import validate as v

pytestmark = pytest.mark.spark

SUITE = """
policy = "warn"
[[expect]]
type = "expect_column_values_to_not_be_null"
column = "url"
[[expect]]
type = "expect_column_values_to_match_regex"
column = "url"
regex = "^https://"
[[expect]]
type = "expect_column_values_to_match_regex"
column = "url"
regex = "^https://"
[[expect]]
type = "expect_column_values_to_be_in_set"
column = "label"
value_set = ["a", "b"]
[[expect]]
type = "expect_column_values_to_be_between"
column = "n"
min_value = 0
max_value = 100
mostly = 0.5
[[expect]]
type = "expect_column_values_to_be_unique"
column = "url"
[[expect]]
type = "expect_column_distinct_values_to_be_in_set"
column = "label"
value_set = ["a", "b"]
[[expect]]
type = "expect_column_distinct_values_to_equal_set"
column = "label"
value_set = ["a", "b"]
[[expect]]
type = "expect_column_mean_to_be_between"
column = "n"
min_value = 0
max_value = 50
[[expect]]
type = "expect_compound_columns_to_be_unique"
column_list = ["url", "n"]
[[expect]]
type = "expect_column_pair_values_a_to_be_greater_than_b"
column_A = "n"
column_B = "m"
or_equal = true
[[expect]]
type = "expect_table_columns_to_match_ordered_list"
column_list = ["url", "n", "label", "m"]
[row_count]
min_ratio = 0.5
max_ratio = 1.0
"""
CLEAN = [(f"https://a/{i}", i % 50, "ab"[i % 2], 0) for i in range(40)]
# a null url, an insecure one, a duplicate, a label outside the set, n above 100 (under mostly), n < m
DIRTY = CLEAN + [(None, 500, "c", 600), ("http://x", 5, "a", 0), ("https://a/1", 1, "b", 0), ("https://b", 101, "a", 0)]


def with_samples(df, suite, rows_in: int) -> tuple[bool, list[dict]]:
    """What one validation with samples of every expectation reports (the checks before this change)."""
    validation = v._validate(df, suite.name, v._expectations(suite, rows_in), v.SUMMARY)
    return bool(validation.success), [v.result_row(r) for r in validation.results]


@pytest.mark.parametrize("rows", [CLEAN, DIRTY], ids=["passing", "failing"])
def test_results_and_samples_are_those_of_one_validation_with_samples(any_spark, tmp_path, rows):
    path = tmp_path / "all.toml"
    path.write_text(SUITE)
    suite = load_suite(path, fields={"out": ["url", "n", "label", "m"]}, topic="out")
    df = any_spark.createDataFrame(rows, "url string, n long, label string, m long").persist()
    try:
        outcome = v.run_suite(df, suite, rows_in=len(rows), stage="s")
        assert (outcome.success, outcome.results) == with_samples(df, suite, len(rows))
    finally:
        df.unpersist()
    failed = {r["expectation"] for r in outcome.results if not r["success"]}
    if rows is DIRTY:
        assert {"expect_column_values_to_match_regex", "expect_column_values_to_be_unique"} <= failed
        samples = {r["expectation"]: r["unexpected_sample"] for r in outcome.results}
        assert samples["expect_column_values_to_match_regex"] == ["http://x"]
        assert samples["expect_column_values_to_be_between"] == [500, 101]  # passed under mostly, sampled
    else:
        assert not failed and all(r["unexpected_sample"] == [] for r in outcome.results)


def test_a_passing_suite_asks_for_no_sample(spark, tmp_path, monkeypatch):
    path = tmp_path / "all.toml"
    path.write_text(SUITE)
    suite = load_suite(path, fields={"out": ["url", "n", "label", "m"]}, topic="out")
    formats = []
    real = v._validate
    monkeypatch.setattr(v, "_validate", lambda df, name, exps, fmt: formats.append(fmt) or real(df, name, exps, fmt))
    df = spark.createDataFrame(CLEAN, "url string, n long, label string, m long")
    assert v.run_suite(df, suite, rows_in=len(CLEAN), stage="s").success
    assert formats == [v.COUNTS_ONLY]

"""Expectation suites before the commit: fail, warn and quarantine, on a real SparkSession."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from pyspark.sql import functions as F

from minikafka import Source
from minikafka.quality import QualityError, load_suite
from minikafka.spark import Stage, StageFailed, run_stage

pytestmark = pytest.mark.spark


class Item(BaseModel):
    url: str
    n: int


class Out(BaseModel):
    url: str
    n: int
    label: str


def suite_file(tmp_path, policy: str, extra: str = "") -> str:
    path = tmp_path / f"{policy}.toml"
    path.write_text(f'policy = "{policy}"\n'
                    '[[expect]]\ntype = "expect_column_values_to_match_regex"\ncolumn = "url"\nregex = "^https://"\n'
                    '[[expect]]\ntype = "expect_column_values_to_be_between"\ncolumn = "n"\nmin_value = 0\nmax_value = 100\n'
                    '[[expect]]\ntype = "expect_column_values_to_be_in_set"\ncolumn = "label"\nvalue_set = ["a", "b"]\n'
                    + extra)
    return str(path)


@pytest.fixture
def ledger(tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        src.topic("items", Item, dedup=("url",)).extend([
            {"url": "https://ok/1", "n": 1}, {"url": "http://insecure/2", "n": 2},
            {"url": "https://ok/3", "n": 500}, {"url": "https://ok/4", "n": 4}])
        src.topic("out", Out, dedup=("url",))
        yield src


def transform(df):
    return df.select("_id", "url", "n", F.when(F.col("n") % 2 == 0, "a").otherwise("b").alias("label"))


def stage(path: str, policy_file: str) -> Stage:
    return Stage("label", ["items"], ["out"], transform=transform,
                 suites=[load_suite(policy_file, fields={"out": ["url", "n", "label"]}, topic="out")])


def test_fail_policy_commits_nothing_and_records_the_failing_expectations(spark, ledger, tmp_path):
    with pytest.raises(StageFailed, match=r"match_regex\(url\) unexpected=1.*be_between\(n\) unexpected=1"):
        run_stage(spark, ledger, stage(ledger.path, suite_file(tmp_path, "fail")))
    assert ledger.topic("out", Out, dedup=("url",)).count() == 0
    assert ledger.topic("items", Item, dedup=("url",)).count("new") == 4
    run = ledger.runs()[0]
    assert run["status"] == "failed"
    (suite,) = run["quality"]["suites"]
    assert suite["success"] is False
    failed = {r["expectation"] for r in suite["results"] if not r["success"]}
    assert failed == {"expect_column_values_to_match_regex", "expect_column_values_to_be_between"}
    assert run["quality"]["report"].endswith(".html")


def test_fail_policy_passes_clean_data(spark, ledger, tmp_path):
    items = ledger.topic("items", Item, dedup=("url",))
    for row_id in (2, 3):  # the insecure url and n > 100: handled for every consumer before the stage runs
        items.set_handled(row_id)
    result = run_stage(spark, ledger, stage(ledger.path, suite_file(tmp_path, "fail")))
    assert result.status == "succeeded" and result.rows_out == 2
    assert result.quality["suites"][0]["success"] is True


def test_warn_policy_commits_and_records(spark, ledger, tmp_path):
    result = run_stage(spark, ledger, stage(ledger.path, suite_file(tmp_path, "warn")))
    assert result.status == "succeeded" and result.rows_out == 4
    assert result.quality["suites"][0]["success"] is False
    assert ledger.runs()[0]["quality"]["suites"][0]["policy"] == "warn"


def test_quarantine_policy_sets_failing_rows_aside_and_commits_the_rest(any_spark, ledger, tmp_path):
    spark = any_spark
    result = run_stage(spark, ledger, stage(ledger.path, suite_file(tmp_path, "quarantine")))
    assert (result.rows_out, result.rows_quarantined) == (2, 2)
    out = ledger.topic("out", Out, dedup=("url",))
    assert sorted(o.url for o in out.iter_new()) == ["https://ok/1", "https://ok/4"]
    reasons = {q["row_id"]: q["reason"] for q in ledger.quarantined("out")}
    assert reasons == {2: "failed expectation: expect_column_values_to_match_regex(url)",
                       3: "failed expectation: expect_column_values_to_be_between(n)"}
    assert '"url":"http://insecure/2"' in ledger.quarantined("out")[-1]["payload"] or \
        '"url":"http://insecure/2"' in ledger.quarantined("out")[0]["payload"]
    assert ledger.topic("items", Item, dedup=("url",)).count("new") == 0


def labelled(item: Item) -> Out:
    if item.n == 4:
        raise ValueError("no label for 4")
    return Out(url=item.url, n=item.n, label="a")


@pytest.mark.parametrize("checks", ["pass", "set rows aside"])
def test_a_per_row_stage_under_quarantine_commits_what_its_checks_let_through(any_spark, ledger, tmp_path, checks):
    # Spark writes the whole output while the checks run; when they set rows aside that
    # write is dropped and what they let through is written instead (error rows in both)
    extra = "max_value = 1000\n" if checks == "pass" else "max_value = 100\n"
    path = tmp_path / "q.toml"
    path.write_text('policy = "quarantine"\n[[expect]]\ntype = "expect_column_values_to_be_between"\n'
                    'column = "n"\nmin_value = 0\n' + extra)
    suite = load_suite(path, fields={"out": ["url", "n", "label"]}, topic="out")
    result = run_stage(any_spark, ledger, Stage("label", ["items"], ["out"], row_fn=labelled, strategy="best_effort",
                                                suites=[suite]))
    kept = [1, 2, 500] if checks == "pass" else [1, 2]
    assert (result.rows_out, result.rows_quarantined, result.rows_failed) == (len(kept), 3 - len(kept), 1)
    assert sorted(o.n for o in ledger.topic("out", Out, dedup=("url",)).iter_new()) == kept
    assert [q["row_id"] for q in ledger.quarantined("out")] == ([] if checks == "pass" else [3])
    assert [r.n for r in ledger.topic("items", Item, dedup=("url",)).iter_new()] == [4]  # its error: retried


def test_quarantine_policy_fails_on_table_level_checks(spark, ledger, tmp_path):
    path = suite_file(tmp_path, "quarantine", "[row_count]\nmin_ratio = 2.0\n")
    with pytest.raises(StageFailed, match="expect_table_row_count_to_be_between"):
        run_stage(spark, ledger, stage(ledger.path, path))
    assert ledger.topic("out", Out, dedup=("url",)).count() == 0


@pytest.mark.parametrize("text, match", [
    ('policy = "fail"\n[[expect]]\ntype = "expect_column_values_to_not_be_null"\ncolumn = "nope"\n',
     r"column 'nope' is not a field of topic 'out'"),
    ('policy = "fail"\n[[expect]]\ntype = "expect_the_moon"\ncolumn = "url"\n', "unknown expectation type 'expect_the_moon'"),
    ('policy = "fail"\n[[expect\n', "invalid TOML"),
    ('policy = "sometimes"\n[[expect]]\ntype = "expect_column_values_to_not_be_null"\ncolumn = "url"\n', "policy must be"),
    ('policy = "fail"\n[[expect]]\ntype = "expect_column_values_to_be_between"\ncolumn = "n"\nmin_value = "x"\n',
     "invalid arguments"),
])
def test_bad_suites_are_refused_before_the_stage_runs(tmp_path, text, match):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(QualityError, match=match):
        load_suite(path, fields={"out": ["url", "n", "label"]}, topic="out")

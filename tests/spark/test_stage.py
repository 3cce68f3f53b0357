"""Spark stages: transform, anti-join, commit, failures, and bad input."""

from __future__ import annotations

import sqlite3

import pytest
from chispa import assert_df_equality
from pydantic import BaseModel
from pyspark.sql import functions as F

from minikafka import Source, TopicNotFoundError
from minikafka.spark import Stage, StageFailed, read_topic, run_stage
from minikafka.spark.stages.conform import OutputSchemaError

pytestmark = pytest.mark.spark


class Item(BaseModel):
    url: str
    title: str
    n: int


class Summary(BaseModel):
    url: str
    words: int


def summarise(df):
    return df.select("_id", "url", F.size(F.split("title", " ")).cast("long").alias("words"))


@pytest.fixture
def ledger(tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        src.topic("items", Item, dedup=("url",))
        src.topic("summaries", Summary, dedup=("url",))
        yield src


def add(ledger, rows):
    ledger.topic("items", Item, dedup=("url",)).extend(
        [{"url": u, "title": t, "n": i} for i, (u, t) in enumerate(rows)])


def test_stage_writes_outputs_acks_inputs_and_logs_the_run(any_spark, ledger):
    spark = any_spark
    add(ledger, [("u1", "a b c"), ("u2", "d")])
    result = run_stage(spark, ledger, Stage("summarise", ["items"], ["summaries"], transform=summarise))
    assert (result.status, result.rows_in, result.rows_out, result.rows_duplicate) == ("succeeded", 2, 2, 0)
    summaries = ledger.topic("summaries", Summary, dedup=("url",))
    expected = spark.createDataFrame([("u1", 3, 1), ("u2", 1, 2)], "url string, words long, _parent_id long")
    assert_df_equality(read_topic(spark, ledger, "summaries").select("url", "words", "_parent_id"), expected,
                       ignore_row_order=True, ignore_metadata=True, ignore_nullable=True)
    assert ledger.topic("items", Item, dedup=("url",)).count("new") == 0
    run = ledger.runs(stage="summarise")[0]
    assert run["run_id"] == result.run_id and run["watermarks"] == {"items": 2} and run["rows_out"] == 2
    assert {r.parent_topic for r in summaries.iter_new(records=True)} == {"items"}


def test_second_run_processes_nothing_and_new_rows_only_once(spark, ledger):
    add(ledger, [("u1", "a")])
    stage = Stage("summarise", ["items"], ["summaries"], transform=summarise)
    run_stage(spark, ledger, stage)
    again = run_stage(spark, ledger, stage)
    assert (again.rows_in, again.rows_out) == (0, 0)
    ledger.topic("items", Item, dedup=("url",)).append({"url": "u2", "title": "x y", "n": 9})
    third = run_stage(spark, ledger, stage)
    assert (third.rows_in, third.rows_out) == (1, 1)
    assert ledger.topic("summaries", Summary, dedup=("url",)).count() == 2


def test_anti_join_skips_keys_the_target_holds_and_duplicates_inside_the_batch(spark, ledger):
    ledger.topic("summaries", Summary, dedup=("url",)).append({"url": "u1", "words": 99})

    def constant_url(df):  # u2 and u3 both map to key "dup"
        return df.select("_id", F.when(F.col("url") == "u1", "u1").otherwise("dup").alias("url"),
                         F.lit(1).cast("long").alias("words"))

    add(ledger, [("u1", "a"), ("u2", "b"), ("u3", "c")])
    result = run_stage(spark, ledger, Stage("s", ["items"], ["summaries"], transform=constant_url))
    assert (result.rows_out, result.rows_duplicate) == (1, 2)
    summaries = ledger.topic("summaries", Summary, dedup=("url",))
    rows = {r.data.url: (r.data.words, r.parent_id) for r in summaries.iter_new(records=True)}
    assert rows == {"u1": (99, None), "dup": (1, 2)}  # the earliest source row wins the key


def test_two_stages_on_one_topic_each_see_every_row(spark, ledger):
    class Length(BaseModel):
        url: str
        n: int

    ledger.topic("lengths", Length, dedup=None)
    add(ledger, [("u1", "a"), ("u2", "b")])
    a = Stage("summarise", ["items"], ["summaries"], transform=summarise)
    b = Stage("measure", ["items"], ["lengths"], transform=lambda df: df.select("_id", "url", "n"))
    from minikafka.spark.stages.stage import register_consumers

    register_consumers(ledger, [a, b])
    run_stage(spark, ledger, a)
    items = ledger.topic("items", Item, dedup=("url",))
    assert items.count("new") == 2 and items.count("new", consumer="measure") == 2
    assert run_stage(spark, ledger, b).rows_out == 2
    assert items.count("handled") == 2


def test_wrong_output_schema_fails_before_anything_is_written(spark, ledger):
    add(ledger, [("u1", "a")])
    cases = [
        (lambda df: df.select("url"), r"lacks column\(s\) \['words'\]"),
        (lambda df: df.select("url", F.lit(1).cast("long").alias("words"), "title"), r"\['title'\].*not fields"),
        (lambda df: df.select("url", F.lit("many").alias("words")), r"column 'words'.*type string.*expects bigint"),
    ]
    for transform, match in cases:
        with pytest.raises(StageFailed, match=match) as info:
            run_stage(spark, ledger, Stage("s", ["items"], ["summaries"], transform=transform))
        assert isinstance(info.value.__cause__, OutputSchemaError)
    assert ledger.topic("items", Item, dedup=("url",)).count("new") == 1
    assert ledger.topic("summaries", Summary, dedup=("url",)).count() == 0
    assert ledger.runs()[0]["status"] == "failed"


def test_null_in_a_required_field_names_topic_field_and_row(spark, ledger):
    add(ledger, [("u1", "a"), ("u2", "b")])

    def nulls(df):
        return df.select("_id", F.when(F.col("url") == "u2", None).otherwise(F.col("url")).alias("url"),
                         F.lit(1).cast("long").alias("words"))

    with pytest.raises(StageFailed, match=r"topic 'summaries', row \d+: field 'url' is None"):
        run_stage(spark, ledger, Stage("s", ["items"], ["summaries"], transform=nulls))
    assert ledger.topic("summaries", Summary, dedup=("url",)).count() == 0
    assert ledger.topic("items", Item, dedup=("url",)).count("new") == 2


def test_value_out_of_range_for_the_type_fails_cleanly(spark, ledger):
    class Small(BaseModel):
        url: str
        amount: float

    ledger.topic("small", Small, dedup=None)
    add(ledger, [("u1", "a")])
    with pytest.raises(StageFailed, match="amount"):
        run_stage(spark, ledger, Stage("s", ["items"], ["small"],
                                       transform=lambda df: df.select("url", F.lit("x").alias("amount"))))


def test_per_row_function_strict_commits_nothing_on_a_failing_row(spark, ledger):
    add(ledger, [("u1", "a"), ("boom", "b"), ("u3", "c")])

    def llm(item: Item) -> Summary:
        if item.url == "boom":
            raise RuntimeError("local model crashed")
        return Summary(url=item.url, words=len(item.title.split()))

    with pytest.raises(StageFailed, match=r"row 2 of topic 'items' failed: RuntimeError: local model crashed"):
        run_stage(spark, ledger, Stage("llm", ["items"], ["summaries"], row_fn=llm))
    assert ledger.topic("summaries", Summary, dedup=("url",)).count() == 0


def test_per_row_best_effort_retries_then_quarantines_after_max_attempts(any_spark, ledger):
    spark = any_spark
    add(ledger, [("u1", "a"), ("boom", "b")])

    def llm(item: Item):
        if item.url == "boom":
            raise ValueError("bad item")
        return {"url": item.url, "words": 1}

    stage = Stage("llm", ["items"], ["summaries"], row_fn=llm, strategy="best_effort", max_attempts=2)
    first = run_stage(spark, ledger, stage)
    assert (first.status, first.rows_out, first.rows_failed, first.rows_quarantined) == ("partial", 1, 1, 0)
    items = ledger.topic("items", Item, dedup=("url",))
    assert [r.url for r in items.iter_new()] == ["boom"]
    attempts = ledger._ledger.conn.execute("SELECT attempts, last_error FROM _minikafka_attempts").fetchall()
    assert attempts == [(1, "ValueError: bad item")]
    second = run_stage(spark, ledger, stage)
    assert (second.rows_in, second.rows_failed, second.rows_quarantined) == (1, 0, 1)
    (q,) = ledger.quarantined("items")
    assert (q["row_id"], q["reason"], q["attempts"], q["consumer"]) == (2, "ValueError: bad item", 2, "llm")
    assert '"url": "boom"' in q["payload"]
    assert items.count("new") == 0


def test_per_row_function_may_return_none_or_many(spark, ledger):
    add(ledger, [("u1", "one two"), ("skip", "x")])

    def split(item: Item):
        if item.url == "skip":
            return None
        return [Summary(url=f"{item.url}#{w}", words=1) for w in item.title.split()]

    result = run_stage(spark, ledger, Stage("split", ["items"], ["summaries"], row_fn=split))
    assert result.rows_out == 2
    summaries = ledger.topic("summaries", Summary, dedup=("url",))
    assert sorted((r.data.url, r.parent_id) for r in summaries.iter_new(records=True)) == [("u1#one", 1), ("u1#two", 1)]


def test_several_outputs_from_one_transform(spark, ledger):
    class Short(BaseModel):
        url: str

    ledger.topic("short", Short, dedup=None)
    add(ledger, [("u1", "a b c"), ("u2", "d")])

    def route(df):
        words = df.select("_id", "url", F.size(F.split("title", " ")).cast("long").alias("words"))
        return {"summaries": words.where("words > 1"), "short": words.where("words <= 1").select("_id", "url")}

    result = run_stage(spark, ledger, Stage("route", ["items"], ["summaries", "short"], transform=route))
    assert result.rows_out == 2
    assert [r.url for r in ledger.topic("short", Short, dedup=None).iter_new()] == ["u2"]


def test_unknown_topic_and_missing_database(spark, ledger, tmp_path):
    with pytest.raises(TopicNotFoundError, match="nope"):
        run_stage(spark, ledger, Stage("s", ["nope"], ["summaries"], transform=summarise))
    with pytest.raises(Exception, match="does not exist"):  # create=True would make the directory
        Source(str(tmp_path / "missing" / "ledger.sqlite"), create=False)


def test_locked_database_fails_the_stage_without_writing(spark, tmp_path):
    path = str(tmp_path / "locked.sqlite")
    with Source(path, busy_timeout=0.2) as src:
        src.topic("items", Item, dedup=("url",)).append({"url": "u1", "title": "a", "n": 1})
        src.topic("summaries", Summary, dedup=("url",))
        blocker = sqlite3.connect(path)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StageFailed, match="locked"):
                run_stage(spark, src, Stage("s", ["items"], ["summaries"], transform=summarise))
        finally:
            blocker.rollback()
            blocker.close()
        assert src.topic("summaries", Summary, dedup=("url",)).count() == 0
        assert src.topic("items", Item, dedup=("url",)).count("new") == 1

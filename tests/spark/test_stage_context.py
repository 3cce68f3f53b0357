"""A stage's context (spark/stages/context.py): what ``transform(df, ctx)`` gets, reads through
the plan's snapshot, filters pushed down to SQLite, and read_groups' exact groups."""

from __future__ import annotations

from datetime import date

import pytest
from pydantic import BaseModel
from pyspark.sql import functions as F

from minikafka import Source
from minikafka.errors import InvalidSettingError, TopicNotFoundError
from minikafka.spark import Stage, run_stage
from minikafka.spark.stages.context import StageContext, takes_context

pytestmark = pytest.mark.spark


class Flight(BaseModel):
    flight: str
    carrier: str
    day: date
    delay: int


class Airline(BaseModel):
    carrier: str
    name: str


class Daily(BaseModel):
    carrier: str
    day: date
    flights: int


class Out(BaseModel):
    flight: str
    carrier: str


D1, D2, D3 = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)


@pytest.fixture
def ledger(tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        src.topic("flights", Flight, dedup=("flight",)).extend([
            {"flight": "f1", "carrier": "AA", "day": D1, "delay": 5},
            {"flight": "f2", "carrier": "UA", "day": D2, "delay": 0}])
        src.topic("airlines", Airline, dedup=("carrier",)).extend([
            {"carrier": "AA", "name": "American"}, {"carrier": "UA", "name": "United"}])
        daily = src.table("daily", Daily, key=("carrier", "day"))
        daily.upsert({"carrier": "AA", "day": D1, "flights": 1})
        daily.upsert({"carrier": "AA", "day": D1, "flights": 2})  # supersedes the first
        src.topic("out", Out, dedup=("flight",))
        yield src


def stage_of(transform) -> Stage:
    return Stage("enrich", ["flights"], ["out"], transform=transform)


def passthrough(df):
    return df.select("_id", "flight", "carrier")


def test_a_transform_with_two_parameters_gets_the_context_and_a_one_parameter_one_does_not():
    assert takes_context(lambda df, ctx: df) and takes_context(lambda df, *more: df)
    assert not takes_context(lambda df: df) and not takes_context(passthrough)
    assert not takes_context(lambda df, *, ctx=None: df)  # keyword-only: not a second positional parameter


def test_the_context_holds_the_run_the_stage_the_date_and_every_topics_high_water_mark(spark, ledger):
    seen = {}

    def transform(df, ctx):
        seen["ctx"] = ctx
        return passthrough(df)

    result = run_stage(spark, ledger, stage_of(transform), pipeline="nightly", logical_date="2024-03-31")
    ctx = seen["ctx"]
    assert isinstance(ctx, StageContext)
    assert (ctx.run_id, ctx.stage, ctx.pipeline, ctx.logical_date) == (result.run_id, "enrich", "nightly", date(2024, 3, 31))
    assert ctx.spark is spark
    assert ctx.snapshot == {"flights": 2, "airlines": 2, "daily": 2, "out": 0}
    assert ledger.runs(stage="enrich")[0]["details"]["logical_date"] == "2024-03-31"


def test_one_parameter_transform_runs_unchanged_and_the_run_records_todays_logical_date(spark, ledger):
    from minikafka.util.clock import now

    result = run_stage(spark, ledger, stage_of(passthrough))
    assert (result.status, result.rows_out) == ("succeeded", 2)
    assert result.details["logical_date"] == now().date().isoformat()


def test_a_bad_logical_date_is_refused_before_the_stage_runs(spark, ledger):
    with pytest.raises(InvalidSettingError, match="logical date must be a date YYYY-MM-DD"):
        run_stage(spark, ledger, stage_of(passthrough), logical_date="2024-02-30")
    assert ledger.runs(stage="enrich") == []


def test_read_gives_fields_and_id_and_a_tables_current_rows_unless_asked_for_all(spark, ledger):
    seen = {}

    def transform(df, ctx):
        seen["airlines"] = sorted(tuple(r) for r in ctx.read("airlines").collect())
        seen["columns"] = ctx.read("airlines").columns
        seen["current"] = [tuple(r) for r in ctx.read("daily").collect()]
        seen["all"] = sorted(r["flights"] for r in ctx.read("daily", which="all").collect())
        with pytest.raises(TopicNotFoundError, match="no topic 'nope'"):
            ctx.read("nope")
        with pytest.raises(InvalidSettingError, match="not a keyed table"):
            ctx.read("airlines", which="current")
        return passthrough(df)

    assert run_stage(spark, ledger, stage_of(transform)).status == "succeeded"
    assert seen["columns"] == ["_id", "carrier", "name"]
    assert seen["airlines"] == [(1, "AA", "American"), (2, "UA", "United")]
    assert seen["current"] == [(2, "AA", D1, 2)]
    assert seen["all"] == [1, 2]


def test_rows_appended_after_the_plan_are_not_read(spark, ledger, tmp_path):
    seen = {}

    def transform(df, ctx):
        with Source(str(tmp_path / "ledger.sqlite")) as other:  # another writer commits while the stage runs
            other.topic("airlines", Airline, dedup=("carrier",)).append({"carrier": "DL", "name": "Delta"})
            other.table("daily", Daily, key=("carrier", "day")).upsert({"carrier": "AA", "day": D1, "flights": 9})
        seen["airlines"] = sorted(r["carrier"] for r in ctx.read("airlines").collect())
        seen["daily"] = [r["flights"] for r in ctx.read("daily").collect()]
        return passthrough(df)

    assert run_stage(spark, ledger, stage_of(transform)).status == "succeeded"
    assert seen == {"airlines": ["AA", "UA"], "daily": [2]}  # the version current at the plan, not the newer one
    assert ledger.topic("airlines", Airline, dedup=("carrier",)).count() == 3


def test_a_stage_exchanging_data_through_a_staging_uri_reads_the_same_rows(spark, ledger, tmp_path):
    seen = {}

    def transform(df, ctx):
        seen["current"] = [tuple(r) for r in ctx.read("daily").collect()]
        seen["groups"] = sorted(r["flight"] for r in ctx.read_groups("flights", df.where(F.col("flight") == "f1"),
                                                                     ["carrier", "day"]).collect())
        return passthrough(df)

    (tmp_path / "shared").mkdir()
    result = run_stage(spark, ledger, stage_of(transform), staging=f"file://{tmp_path}/shared")
    assert result.details["staging"] == "exchange"
    assert seen == {"current": [(2, "AA", D1, 2)], "groups": ["f1"]}


def test_chunked_stages_get_the_context_each_chunk_reading_up_to_its_own_bound(spark, ledger):
    from minikafka.spark.stages.chunks import run_stage_in_chunks

    seen = []

    def transform(df, ctx):
        seen.append((ctx.run_id, ctx.logical_date, ctx.snapshot["flights"], ctx.read("flights").count()))
        return passthrough(df)

    runs = run_stage_in_chunks(spark, ledger, stage_of(transform), 1, run_id="r", logical_date="2024-03-31")
    assert [r.rows_in for r in runs] == [1, 1]
    assert seen == [("r", date(2024, 3, 31), 1, 1), ("r.2", date(2024, 3, 31), 2, 2)]


def pushed_filters(df) -> str:
    """What the JDBC scan of ``df``'s physical plan hands SQLite (its PushedFilters)."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    line = next(line for line in plan.splitlines() if "PushedFilters" in line)
    return line.split("PushedFilters:", 1)[1].split("ReadSchema", 1)[0]


def test_where_on_a_read_is_pushed_down_to_sqlite(spark, ledger):
    seen = {}

    def transform(df, ctx):
        picked = ctx.read("airlines").where(F.col("carrier") == "UA")
        seen["plan"] = pushed_filters(picked)
        seen["rows"] = [r["name"] for r in picked.collect()]
        return passthrough(df)

    run_stage(spark, ledger, stage_of(transform))
    assert "carrier" in seen["plan"] and "UA" in seen["plan"]
    assert seen["rows"] == ["United"]


def test_read_groups_returns_exactly_the_rows_of_the_frames_groups_with_in_lists_pushed(spark, ledger):
    ledger.topic("flights", Flight, dedup=("flight",)).extend([
        {"flight": "f3", "carrier": "AA", "day": D2, "delay": 1},   # (AA, D2): a combination the groups lack
        {"flight": "f4", "carrier": "UA", "day": D1, "delay": 2},   # (UA, D1): neither
        {"flight": "f5", "carrier": "AA", "day": D1, "delay": 3},
        {"flight": "f6", "carrier": "DL", "day": D3, "delay": 4}])
    seen = {}

    def transform(df, ctx):
        touched = df.where(F.col("flight").isin("f1", "f2"))  # groups (AA, D1) and (UA, D2)
        rows = ctx.read_groups("flights", touched, ["carrier", "day"])
        seen["plan"] = pushed_filters(rows)
        seen["flights"] = sorted(r["flight"] for r in rows.collect())
        return passthrough(df)

    run_stage(spark, ledger, stage_of(transform))
    assert seen["flights"] == ["f1", "f2", "f5"]
    assert all(word in seen["plan"] for word in ("carrier", "AA", "UA", "day", "2024-01-01", "2024-01-02")), seen["plan"]


def test_read_groups_over_the_limit_is_still_exact_and_nulls_match_nulls(spark, ledger, monkeypatch):
    from minikafka.spark.stages import context

    monkeypatch.setattr(context, "GROUP_LIMIT", 1)
    seen = {}

    def transform(df, ctx):
        rows = ctx.read_groups("flights", df.where(F.col("flight") == "f2"), "carrier")
        seen["one"] = sorted(r["flight"] for r in rows.collect())
        rows = ctx.read_groups("flights", df, ["carrier", "day"])  # two groups: over the limit, a semi-join alone
        seen["plan"] = pushed_filters(rows)
        seen["both"] = sorted(r["flight"] for r in rows.collect())
        return passthrough(df)

    run_stage(spark, ledger, stage_of(transform))
    assert seen["one"] == ["f2"] and seen["both"] == ["f1", "f2"]
    assert "AA" not in seen["plan"] and "2024" not in seen["plan"], seen["plan"]


# -- one signature on every engine: run --in-process, a client of the warm engine, spark-submit --------

JOB = '''
import json

from pyspark.sql import functions as F

from minikafka.job import main


def transform(df, ctx):
    airlines = ctx.read("airlines")
    seen = {"run_id": ctx.run_id, "stage": ctx.stage, "pipeline": ctx.pipeline,
            "logical_date": ctx.logical_date.isoformat(), "snapshot": ctx.snapshot,
            "airlines": sorted(r["name"] for r in airlines.collect())}
    return (df.join(airlines.select("carrier", "name"), "carrier", "left")
            .select("_id", "flight", "carrier", "name", F.lit(json.dumps(seen)).alias("note")))


if __name__ == "__main__":
    raise SystemExit(main())
'''

MODELS = '''
from datetime import date

from pydantic import BaseModel


class Flight(BaseModel):
    flight: str
    carrier: str
    day: date
    delay: int


class Airline(BaseModel):
    carrier: str
    name: str


class Noted(BaseModel):
    flight: str
    carrier: str
    name: str | None = None
    note: str
'''

PIPELINE = '''
[pipeline]
name = "nightly"
source = "{ledger}"
master = "local[1]"

[spark]
"spark.sql.shuffle.partitions" = "2"

[topics."flights"]
model = "{pkg}.models:Flight"
dedup = ["flight"]

[topics."airlines"]
model = "{pkg}.models:Airline"
dedup = ["carrier"]

[topics."noted"]
model = "{pkg}.models:Noted"
dedup = ["flight"]

[[stages]]
name = "enrich"
job = "{pkg}.job"
inputs = ["flights"]
outputs = ["noted"]
'''


def a_pipeline(tmp_path, monkeypatch, ledgers=("ledger.sqlite",)):
    """A small pipeline in a package of its own (importable here and by every stage process),
    and its ledger(s), each with flights and airlines of its own."""
    import importlib
    import os
    import uuid

    from minikafka.pipelines import load_pipeline

    pkg = f"ctxjobs_{uuid.uuid4().hex[:8]}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "models.py").write_text(MODELS)
    (tmp_path / pkg / "job.py").write_text(JOB)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    models = importlib.import_module(f"{pkg}.models")
    path = tmp_path / "pipeline.toml"
    path.write_text(PIPELINE.format(ledger=tmp_path / ledgers[0], pkg=pkg))
    for i, name in enumerate(ledgers):
        with Source(str(tmp_path / name)) as src:
            src.topic("flights", models.Flight, dedup=("flight",)).extend(
                [{"flight": f"f{i}", "carrier": "AA", "day": D1, "delay": 1}])
            src.topic("airlines", models.Airline, dedup=("carrier",)).extend(
                [{"carrier": "AA", "name": f"American of {name}"}])
            src.topic("noted", models.Noted, dedup=("flight",))
    return load_pipeline(path)


def noted(ledger) -> tuple[dict, dict]:
    """(what the transform saw, the run row of its stage)."""
    import json
    import sqlite3

    with sqlite3.connect(str(ledger)) as conn:
        (row,) = conn.execute('SELECT note FROM "noted"').fetchall()
    with Source(str(ledger)) as src:
        (run,) = src.runs(stage="enrich")
    return json.loads(row[0]), run


def check_context(defn, result, logical_date: str):
    assert result.ok, result.table()
    seen, run = noted(defn.source)
    assert seen == {"run_id": run["run_id"], "stage": "enrich", "pipeline": "nightly", "logical_date": logical_date,
                    "snapshot": {"airlines": 1, "flights": 1, "noted": 0}, "airlines": ["American of ledger.sqlite"]}
    assert run["details"]["logical_date"] == logical_date
    return run


def test_in_process_stages_get_the_context(spark, tmp_path, monkeypatch):
    from minikafka.pipelines.runner import run_pipeline

    defn = a_pipeline(tmp_path, monkeypatch)
    result = run_pipeline(defn, in_process=True, logical_date="2024-03-31", echo=lambda m: None)
    check_context(defn, result, "2024-03-31")


def test_stages_on_the_warm_engine_get_the_context(engine_url, tmp_path, monkeypatch):
    from minikafka.pipelines.runner import run_pipeline

    defn = a_pipeline(tmp_path, monkeypatch)
    result = run_pipeline(defn, engine="connect", remote=engine_url, logical_date="2024-03-31", echo=lambda m: None)
    assert check_context(defn, result, "2024-03-31")["details"]["session"] == "connect"


def test_spark_submit_stages_get_the_context_with_todays_date_by_default(tmp_path, monkeypatch):
    from minikafka.pipelines.runner import run_pipeline
    from minikafka.util.clock import now

    defn = a_pipeline(tmp_path, monkeypatch)
    result = run_pipeline(defn, engine="submit", echo=lambda m: None)
    check_context(defn, result, now().date().isoformat())


def test_in_process_with_another_source_reads_that_ledger_not_the_pipeline_files(spark, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from minikafka.cli import main

    a_pipeline(tmp_path, monkeypatch, ledgers=("ledger.sqlite", "other.sqlite"))
    # the command a user types: the pipeline file names ledger.sqlite, --source overrides it
    result = CliRunner().invoke(main, ["run", "--pipeline", str(tmp_path / "pipeline.toml"), "--in-process",
                                       "--source", str(tmp_path / "other.sqlite")])
    assert result.exit_code == 0, result.output
    seen, _run = noted(tmp_path / "other.sqlite")
    assert seen["airlines"] == ["American of other.sqlite"]
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        assert src.runs(stage="enrich") == []

"""The stage harness the package ships (minikafka.testing): a pipeline file on a temporary ledger,
rows fed in, one stage run through the real stage code with its suites, on both engines."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path

import pytest

from minikafka.errors import StageFailed

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
HOMELAB = ROOT / "conf" / "homelab.toml"
FLIGHTS = ROOT / "tests" / "pipelines" / "flights" / "flights.toml"


def item(url: str, title: str = "a title") -> dict:
    return {"url": url, "feed": "blog", "title": title, "body": "some words here", "published": "2026-01-02T03:04:05Z"}


def test_a_stage_of_the_example_pipeline_fed_rows_writes_its_outputs_on_the_classic_session(minikafka_pipeline):
    harness = minikafka_pipeline(HOMELAB)
    assert harness.feed("rss.items", [item("https://www.youtube.com/watch?v=abc", "a video"),
                                      item("https://example.org/post", "a post")]) == 2

    result = harness.run_stage("split_youtube", engine="classic")

    assert result.status == "succeeded"
    assert [r["url"] for r in result.outputs["rss.youtube"]] == ["https://www.youtube.com/watch?v=abc"]
    assert result.quarantined == []
    assert (result.run["rows_in"], result.run["rows_out"]) == (2, 1)
    assert result.run["details"]["session"] == "classic"
    harness.assert_output_equals("rss.youtube", [result.outputs["rss.youtube"][0]])
    with pytest.raises(AssertionError):
        harness.assert_output_equals("rss.youtube", [{**result.outputs["rss.youtube"][0], "title": "another"}])


def test_a_stage_writing_a_keyed_table_returns_the_versions_it_wrote(minikafka_pipeline):
    harness = minikafka_pipeline(HOMELAB)
    harness.feed("rss.items", [item("https://example.org/1"), item("https://example.org/2")])

    result = harness.run_stage("feed_day")

    assert result.outputs["rss.feed_day"] == [{"feed": "blog", "day": date(2026, 1, 2), "items": 2}]
    harness.assert_output_equals("rss.feed_day", [{"feed": "blog", "day": date(2026, 1, 2), "items": 2}])


def test_the_harness_ledger_is_a_temporary_one_not_the_pipeline_files_source(minikafka_pipeline, minikafka_ledger):
    harness = minikafka_pipeline(HOMELAB)
    assert harness.definition.source == Path(minikafka_ledger).resolve()
    assert Path(minikafka_ledger).is_file()
    assert {"rss.items", "rss.youtube", "rss.feed_day"} <= set(harness.source.topics())


def test_a_stage_whose_suite_quarantines_a_row_returns_it_on_the_engine(minikafka_pipeline, tmp_path):
    (tmp_path / "matched.toml").write_text(textwrap.dedent('''\
        topic = "enriched"
        policy = "quarantine"

        [[expect]]
        type = "expect_column_values_to_not_be_null"
        column = "airline"
        '''))
    (tmp_path / "pipeline.toml").write_text(textwrap.dedent('''\
        [pipeline]
        name = "lookups"
        source = "never-used.sqlite"
        master = "local[1]"

        [topics."flights"]
        model = "tests.pipelines.lookup_jobs:Flight"
        dedup = ["flight_id"]

        [topics."airlines"]
        model = "tests.pipelines.lookup_jobs:Airline"
        dedup = ["carrier"]

        [topics."enriched"]
        model = "tests.pipelines.lookup_jobs:Enriched"
        dedup = ["flight_id"]

        [[stages]]
        name = "enrich"
        job = "tests.pipelines.lookup_jobs"
        inputs = ["flights"]
        lookups = ["airlines"]
        outputs = ["enriched"]
        expectations = ["matched.toml"]
        '''))
    harness = minikafka_pipeline(tmp_path / "pipeline.toml")
    harness.feed("airlines", [{"carrier": "AA", "name": "American"}])
    harness.feed("flights", [{"flight_id": 1, "carrier": "AA"}, {"flight_id": 2, "carrier": "UA"}])

    result = harness.run_stage("enrich", engine="connect")

    assert result.run["details"]["session"] == "connect"
    assert result.outputs["enriched"] == [{"flight_id": 1, "carrier": "AA", "airline": "American"}]
    (q,) = result.quarantined
    assert (q["topic"], q["origin"]) == ("enriched", "quality")
    assert "airline" in q["reason"] and '"flight_id": 2' in q["payload"].replace('":2', '": 2')
    assert not (tmp_path / "never-used.sqlite").exists()
    harness.assert_output_equals("enriched", [{"flight_id": 1, "carrier": "AA", "airline": "American"}])


def test_a_lookup_stage_fed_reference_rows_joins_them(minikafka_pipeline):
    harness = minikafka_pipeline(FLIGHTS)
    harness.feed("airlines", [{"carrier": "AA", "name": "American Airlines Inc."}])
    harness.feed("weather", [{"origin": "JFK", "day": "2013-01-01", "hour": 5, "temp": 39.0, "wind_speed": 12.7}])
    harness.feed("flights.clean", [
        {"flight_id": "f1", "carrier": "AA", "origin": "JFK", "day": "2013-01-01", "hour": 5, "dep_delay": 2.0},
        {"flight_id": "f2", "carrier": "B6", "origin": "LGA", "day": "2013-01-01", "hour": 6, "dep_delay": -3.0},
    ])

    result = harness.run_stage("enrich")

    assert result.run["details"]["lookups"]["airlines"]["rows"] == 1
    harness.assert_output_equals("flights.enriched", [
        {"flight_id": "f1", "carrier": "AA", "airline": "American Airlines Inc.", "origin": "JFK",
         "day": date(2013, 1, 1), "hour": 5, "dep_delay": 2.0, "temp": 39.0, "wind_speed": 12.7},
        {"flight_id": "f2", "carrier": "B6", "airline": None, "origin": "LGA", "day": date(2013, 1, 1), "hour": 6,
         "dep_delay": -3.0, "temp": None, "wind_speed": None},
    ])
    assert harness.topic("airlines").count() == 1  # a lookup is read, never consumed


def test_a_failing_transform_surfaces_stage_failed_with_its_message(minikafka_pipeline, tmp_path):
    (tmp_path / "broken.toml").write_text(textwrap.dedent('''\
        [pipeline]
        name = "broken"
        source = "ledger.sqlite"

        [topics."videos"]
        model = "tests.conftest:Video"
        dedup = ["url"]

        [topics."cleaned"]
        model = "tests.conftest:Cleaned"
        dedup = ["url"]

        [[stages]]
        name = "clean"
        job = "tests.pipelines.failing_job"
        inputs = ["videos"]
        outputs = ["cleaned"]
        '''))
    harness = minikafka_pipeline(tmp_path / "broken.toml")
    harness.feed("videos", [{"creator": "a", "url": "https://v/1", "length_seconds": 60}])

    with pytest.raises(StageFailed, match="broken on purpose"):
        harness.run_stage("clean")
    assert harness.topic("cleaned").count() == 0
    assert harness.source.runs(stage="clean")[0]["status"] == "failed"


def test_an_unknown_engine_is_refused_in_one_line(minikafka_pipeline):
    harness = minikafka_pipeline(HOMELAB)
    with pytest.raises(Exception, match="engine must be one of classic, connect, got 'warm'"):
        harness.run_stage("split_youtube", engine="warm")


TEAM_PIPELINE = '''\
[pipeline]
name = "prices"
source = "data/prices.sqlite"

[topics."prices.raw"]
model = "prices_team.models:Price"
dedup = ["sku"]

[topics."prices.eur"]
model = "prices_team.models:PriceEur"
dedup = ["sku"]

[[stages]]
name = "to_eur"
job = "prices_team.to_eur"
inputs = ["prices.raw"]
outputs = ["prices.eur"]
'''

TEAM_MODELS = '''\
from pydantic import BaseModel


class Price(BaseModel):
    sku: str
    cents: int


class PriceEur(BaseModel):
    sku: str
    eur: float
'''

TEAM_JOB = '''\
from pyspark.sql import functions as F


def transform(df):
    return df.select("_id", "sku", (F.col("cents") / 100.0).alias("eur"))
'''

TEAM_TEST = '''\
import pytest


@pytest.mark.parametrize("engine", ["classic", "connect"])
def test_to_eur_divides_cents(minikafka_pipeline, engine):
    harness = minikafka_pipeline("pipeline.toml")
    harness.feed("prices.raw", [{"sku": "a", "cents": 250}, {"sku": "b", "cents": 5}])
    result = harness.run_stage("to_eur", engine=engine)
    assert result.run["status"] == "succeeded"
    harness.assert_output_equals("prices.eur", [{"sku": "a", "eur": 2.5}, {"sku": "b", "eur": 0.05}])
'''


def test_a_team_project_tests_its_stage_with_only_the_plugins_fixtures(tmp_path):
    project = tmp_path / "team"
    (project / "prices_team").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pipeline.toml").write_text(TEAM_PIPELINE)
    (project / "prices_team" / "__init__.py").write_text("")
    (project / "prices_team" / "models.py").write_text(TEAM_MODELS)
    (project / "prices_team" / "to_eur.py").write_text(TEAM_JOB)
    (project / "tests" / "test_to_eur.py").write_text(TEAM_TEST)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.pop("PYTEST_ADDOPTS", None)
    # the plugin by its module name: the pytest11 entry point (the same name) is there only once
    # the package is installed; a worktree on PYTHONPATH is not
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "minikafka.testing.plugin", "tests"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout
    assert not (project / "data").exists()  # the pipeline file's own ledger is never touched

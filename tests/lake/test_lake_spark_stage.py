"""A Spark pipeline whose output topic has an Iceberg target: each stage commit appends to it."""

from __future__ import annotations

import pytest

pytest.importorskip("pyiceberg")

from minikafka import Source  # noqa: E402
from minikafka.connectors.ingest import ingest_jsonl  # noqa: E402
from minikafka.pipelines.definition import load_pipeline  # noqa: E402
from minikafka.pipelines.opening import open_source  # noqa: E402
from minikafka.pipelines.runner import run_pipeline  # noqa: E402
from schemas.homelab import Scored  # noqa: E402
from tests.pipelines.helpers import generate, homelab_copy  # noqa: E402

from .readers import read_three_ways  # noqa: E402

pytestmark = pytest.mark.spark


def ingest(defn, path):
    with open_source(defn) as src:
        return ingest_jsonl(src._topics["rss.items"], path)


def test_the_example_pipeline_writes_rss_scored_to_its_iceberg_table_in_the_stage_commit(spark, tmp_path):
    # the shipped conf/homelab-lake.toml itself, its ledger and lake directory moved under tmp_path
    defn = load_pipeline(homelab_copy(tmp_path, conf="homelab-lake.toml", replace={
        'location = "../lake/scored"': f'location = "{tmp_path / "lake" / "scored"}"'}))
    assert defn.lake["scored"].location == str(tmp_path / "lake" / "scored")
    ingest(defn, generate(tmp_path, 120))
    result = run_pipeline(defn, in_process=True, echo=lambda m: None)
    assert result.ok, result.table()
    ingest(defn, generate(tmp_path, 40, start=10_000))
    again = run_pipeline(defn, in_process=True, echo=lambda m: None)
    assert again.ok, again.table()
    score = {o.name: o.run for o in again.outcomes}["score"]
    assert score["details"]["lake"]["scored"]["rows"] == score["rows_out"] > 0
    assert score["details"]["lake"]["scored"]["read_back"] is False  # written from the rows the commit stored
    with Source(str(defn.source)) as src:
        topic = src.topic("rss.scored", Scored, dedup=("url",))
        expected = sorted((r.id, r.data.url, r.data.published) for r in topic.iter_new(records=True))
    read = read_three_ways(str(defn.source), "scored")
    for name, (rows, _types) in read.items():
        assert sorted((r[0], r[1], r[6]) for r in rows) == expected, name
    assert read["duckdb"][1] == read["pyiceberg"][1] == read["polars"][1]

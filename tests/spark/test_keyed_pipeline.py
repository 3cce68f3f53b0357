"""A pipeline with a ``[tables]`` entry run on Spark: a stage's output merged into the table in
its commit (both write paths, and a dry run), a downstream stage reading the table's versions
as new rows, and ``minikafka compact`` keeping a version a lagging consumer has not read."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from minikafka import Source
from minikafka.cli import main
from minikafka.ledger.topics import keyed
from minikafka.pipelines import load_pipeline
from minikafka.pipelines.runner import run_pipeline
from tests.pipelines.keyed_jobs import CarrierDay, Flight, Version
from tests.pipelines.test_tables_definition import TEXT

pytestmark = pytest.mark.spark

PIPELINE = TEXT + """
[topics."carrier_day.log"]
model = "tests.pipelines.keyed_jobs:Version"

[[stages]]
name = "echo"
job = "tests.pipelines.keyed_echo"
inputs = ["carrier_day"]
outputs = ["carrier_day.log"]
"""
D1, D2 = date(2024, 1, 1), date(2024, 1, 2)


def flights(*rows: tuple) -> list[dict]:
    return [{"flight_id": f, "carrier": c, "day": d, "delay": delay} for f, c, d, delay in rows]


def pipeline(tmp_path: Path):
    path = tmp_path / "pipeline.toml"
    path.write_text(PIPELINE)
    return load_pipeline(path)


def run(defn, **options):
    result = run_pipeline(defn, in_process=True, echo=lambda m: None, **options)
    assert result.ok, result
    return result


def append(defn, rows: list[dict]) -> None:
    with Source(str(defn.source), create=True) as src:
        src.topic("flights", Flight, dedup=("flight_id",)).extend(rows)


def current(defn) -> list[tuple]:
    with Source(str(defn.source)) as src:
        table = src.table("carrier_day", CarrierDay, key=("carrier", "day"),
                          merge={"flights": "sum", "max_delay": "max"})
        return sorted((r.carrier, r.day, r.flights, r.max_delay) for r in table.iter_current())


def last_run(defn, stage: str) -> dict:
    with Source(str(defn.source)) as src:
        return src.runs(stage=stage, limit=1)[0]


@pytest.mark.parametrize("follow", [True, False])
def test_a_stage_output_into_a_table_is_merged_in_its_commit_and_late_rows_update_it(spark, tmp_path, monkeypatch,
                                                                                   follow):
    from minikafka.spark.stages import stage as stage_module

    monkeypatch.setattr(stage_module, "FOLLOW_WRITE", follow)
    defn = pipeline(tmp_path)
    append(defn, flights(("f1", "AA", D1, 5), ("f2", "AA", D1, 30), ("f3", "UA", D1, 0), ("f4", "UA", D2, 7)))
    run(defn, stage="per_day")
    assert current(defn) == [("AA", D1, 2, 30), ("UA", D1, 1, 0), ("UA", D2, 1, 7)]
    first = last_run(defn, "per_day")
    assert (first["rows_in"], first["rows_out"], first["rows_duplicate"]) == (4, 3, 1)
    assert first["details"]["tables"]["carrier_day"] == {"rows": 4, "inserted": 3, "updated": 0, "unchanged": 1}

    append(defn, flights(("f5", "AA", D1, 10), ("f6", "DL", D2, 1)))  # a late flight of a known key, a new key
    run(defn, stage="per_day")
    assert current(defn) == [("AA", D1, 3, 30), ("DL", D2, 1, 1), ("UA", D1, 1, 0), ("UA", D2, 1, 7)]
    second = last_run(defn, "per_day")
    assert second["details"]["tables"]["carrier_day"] == {"rows": 2, "inserted": 1, "updated": 1, "unchanged": 0}
    assert second["rows_out"] == 2


def test_a_dry_run_rehearses_the_merge_and_writes_nothing(spark, tmp_path):
    defn = pipeline(tmp_path)
    append(defn, flights(("f1", "AA", D1, 5), ("f2", "AA", D1, 30)))
    with Source(str(defn.source)) as src:  # the pipeline's topics and table, as a run would create them
        src.table("carrier_day", CarrierDay, key=("carrier", "day"), merge={"flights": "sum", "max_delay": "max"})
    result = run(defn, stage="per_day", dry_run=True)
    (outcome,) = [o for o in result.outcomes if o.name == "per_day"]
    assert (outcome.run["rows_in"], outcome.run["rows_out"], outcome.run["rows_duplicate"]) == (2, 1, 1)
    details = outcome.run["details"]
    details = json.loads(details) if isinstance(details, str) else details
    assert details["tables"]["carrier_day"] == {"rows": 2, "inserted": 1, "updated": 0, "unchanged": 1}
    assert current(defn) == []
    with Source(str(defn.source)) as src:
        assert keyed.count_current(src.ledger.conn, "carrier_day") == 0
        assert src.topic("flights", Flight, dedup=("flight_id",)).count("new") == 2


def test_a_stage_reading_a_table_gets_its_versions_and_compact_keeps_what_it_has_not_read(spark, tmp_path):
    defn = pipeline(tmp_path)
    append(defn, flights(("f1", "AA", D1, 5)))
    run(defn)  # both stages: the echo stage reads version 1
    append(defn, flights(("f2", "AA", D1, 9)))
    run(defn, stage="per_day")  # version 2 supersedes 1 (read)
    append(defn, flights(("f3", "AA", D1, 2)))
    run(defn, stage="per_day")  # version 3 supersedes 2, which the echo stage has not read
    compacted = CliRunner().invoke(main, ["compact", "--source", str(defn.source), "--json"])
    assert compacted.exit_code == 0, compacted.output
    with Source(str(defn.source)) as src:
        ids = [r[0] for r in src.ledger.conn.execute('SELECT "_id" FROM "carrier_day" ORDER BY "_id"')]
    assert ids == [2, 3]  # version 1 was read and superseded: gone; version 2 waits for the echo stage
    run(defn, stage="echo")
    with Source(str(defn.source)) as src:
        log = src.topic("carrier_day.log", Version, dedup=None)
        assert [(v.flights, v.max_delay) for v in log.iter_new()] == [(1, 5), (2, 9), (3, 9)]
    compacted = CliRunner().invoke(main, ["compact", "--source", str(defn.source), "--json"])
    assert '"carrier_day": 1' in compacted.output
    assert current(defn) == [("AA", D1, 3, 9)]

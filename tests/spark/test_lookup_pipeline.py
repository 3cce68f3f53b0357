"""A pipeline with a lookup, end to end: second nights join, a late reference row is set aside
by a quarantine suite and joins once requeued with --rerun, the lookup is never consumed."""

from __future__ import annotations

import json

import pytest

from minikafka import Source
from tests.cli.helpers import invoke
from tests.pipelines.lookup_jobs import Airline, Enriched, Flight

pytestmark = pytest.mark.spark

PIPELINE = '''
[pipeline]
source = "ledger.sqlite"
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
'''

SUITE = '''topic = "enriched"
policy = "quarantine"

[[expect]]
type = "expect_column_values_to_not_be_null"
column = "airline"
'''


def append(path, topic, model, dedup, rows):
    with Source(str(path)) as src:
        src.topic(topic, model, dedup=dedup).extend(rows)


def enriched(path) -> dict:
    with Source(str(path)) as src:
        return {r["flight_id"]: r["airline"] for r in src.topic("enriched", Enriched, dedup="flight_id").to_arrow()
                .to_pylist()}


def test_a_fact_whose_reference_arrives_later_is_quarantined_then_joins_once_requeued(tmp_path):
    (tmp_path / "matched.toml").write_text(SUITE)
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(PIPELINE)
    ledger = tmp_path / "ledger.sqlite"
    append(ledger, "airlines", Airline, "carrier", [{"carrier": "AA", "name": "American"}])
    append(ledger, "flights", Flight, "flight_id", [{"flight_id": 1, "carrier": "AA"}, {"flight_id": 2, "carrier": "UA"}])

    night1 = invoke("run", pipeline, "--in-process", "--create")
    assert night1.exit_code == 0, night1.output
    assert enriched(ledger) == {1: "American"}  # flight 2's airline is not there yet: set aside
    consumers = json.loads(invoke("consumers", "airlines", "--source", ledger, "--json").output)
    assert consumers == []  # the lookup is never consumed: nothing pending for the stage on it

    append(ledger, "airlines", Airline, "carrier", [{"carrier": "UA", "name": "United"}])
    requeued = invoke("quarantine", "enriched", "requeue", "--all", "--rerun", "--source", ledger)
    assert requeued.exit_code == 0, requeued.output
    assert "1 pending again" in requeued.output
    append(ledger, "flights", Flight, "flight_id", [{"flight_id": 3, "carrier": "UA"}])

    night2 = invoke("run", pipeline, "--in-process")
    assert night2.exit_code == 0, night2.output
    assert enriched(ledger) == {1: "American", 2: "United", 3: "United"}
    with Source(str(ledger)) as src:
        assert src.quarantined("enriched") == []
        last = src.runs(stage="enrich")[0]
        assert (last["rows_in"], last["rows_out"]) == (2, 2)
        assert last["details"]["lookups"]["airlines"]["rows"] == 2

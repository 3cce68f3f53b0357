"""`check` and `doctor` warn about designs that give wrong answers over nights, naming the tool
that fixes each: a join of several plain inputs (lookups), an aggregate written into a
deduplicated topic (a keyed table). No JVM: the job's source is read, not run."""

from __future__ import annotations

import json
import textwrap

import pytest

from minikafka import Source
from minikafka.pipelines.definition import load_pipeline
from minikafka.pipelines.design import design_warnings
from minikafka.pipelines.doctor import doctor_checks
from tests.cli.helpers import invoke
from tests.pipelines.helpers import ROOT

MODELS = "tests.pipelines.flights.models"
PIPELINE = """
[pipeline]
name = "nightly"
source = "ledger.sqlite"

[topics.flights]
model = "tests.pipelines.flights.models:Flight"
dedup = ["flight_id"]

[topics.airlines]
model = "tests.pipelines.flights.models:Airline"
dedup = ["carrier"]

[topics.enriched]
model = "tests.pipelines.flights.models:Enriched"
dedup = ["flight_id"]

{daily}

[[stages]]
name = "enrich"
job = "{module}.enrich"
inputs = {enrich_inputs}
{enrich_lookups}outputs = ["enriched"]

[[stages]]
name = "daily"
job = "{module}.daily"
inputs = ["enriched"]
outputs = ["daily"]
"""

ENRICH_JOIN = '''
def transform(frames):
    """Joins the new flights to the new airlines."""
    return frames["flights"].join(frames["airlines"], "carrier", "left")
'''

ENRICH_UNION = '''
import os


def transform(frames):
    label = ", ".join(sorted(frames)) + os.path.join("a", "b")
    return frames["flights"].unionByName(frames["airlines"], allowMissingColumns=True)
'''

DAILY_AGG = '''
from pyspark.sql import functions as F


def transform(df):
    return df.groupBy("carrier", "day").agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
'''

DAILY_SELECT = '''
def transform(df):
    return df.select("carrier", "day")
'''


@pytest.fixture
def write(tmp_path, monkeypatch):
    """Write a pipeline file and its two job modules (a package of its own); return the loaded pipeline."""
    monkeypatch.syspath_prepend(str(tmp_path))
    counter = iter(range(100))

    def make(*, enrich=ENRICH_JOIN, daily=DAILY_AGG, enrich_inputs=("flights", "airlines"), enrich_lookups=(),
             daily_dedup=("carrier", "day"), daily_table=False):
        module = f"designjobs{next(counter)}_{tmp_path.name.replace('-', '_')}"
        package = tmp_path / module
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "enrich.py").write_text(textwrap.dedent(enrich))
        (package / "daily.py").write_text(textwrap.dedent(daily))
        path = tmp_path / f"{module}.toml"
        declared = (f'[tables.daily]\nmodel = "{MODELS}:CarrierDay"\nkey = ["carrier", "day"]' if daily_table else
                    f'[topics.daily]\nmodel = "{MODELS}:CarrierDay"\ndedup = {json.dumps(list(daily_dedup))}')
        path.write_text(PIPELINE.format(module=module, enrich_inputs=json.dumps(list(enrich_inputs)),
                                        daily=declared,
                                        enrich_lookups=f"lookups = {json.dumps(list(enrich_lookups))}\n" if enrich_lookups else ""))
        Source(str(tmp_path / "ledger.sqlite")).close()
        return path

    return make


def _by_name(checks):
    return {c.name: c for c in checks}


def test_a_stage_that_joins_two_plain_inputs_is_warned_to_declare_the_reference_as_a_lookup(write):
    found = _by_name(design_warnings(load_pipeline(write())))
    warning = found["stage enrich inputs"]
    assert warning.state == "warn"
    assert "lookups = [...]" in warning.reason and "docs/how-to/lookups.md" in warning.reason
    assert "flights, airlines" in warning.reason and "empty" in warning.reason


def test_an_aggregate_written_into_a_deduplicated_topic_is_warned_to_use_a_keyed_table(write):
    found = _by_name(design_warnings(load_pipeline(write())))
    warning = found["stage daily aggregate"]
    assert warning.state == "warn"
    assert "keyed table ([tables], keyed by the group's columns)" in warning.reason and "ctx.read_groups" in warning.reason
    assert "agg, groupBy in daily.py" in warning.reason and "into daily" in warning.reason
    assert "docs/how-to/aggregates-with-late-data.md" in warning.reason
    assert warning.numbers["methods"] == ["agg", "groupBy"] and warning.numbers["topics"] == ["daily"]


def test_one_input_a_union_a_string_join_a_plain_select_or_an_undeduplicated_output_are_not_warned(write):
    one_input = design_warnings(load_pipeline(write(enrich_inputs=["flights"])))
    assert [w.name for w in one_input] == ["stage daily aggregate"]
    assert not design_warnings(load_pipeline(write(enrich=ENRICH_UNION, daily=DAILY_SELECT)))
    assert not design_warnings(load_pipeline(write(enrich=ENRICH_UNION, daily_dedup=[])))


def test_the_fixed_designs_a_lookup_and_an_aggregate_into_a_keyed_table_are_not_warned(write):
    fixed = write(enrich_inputs=["flights"], enrich_lookups=["airlines"], daily_table=True)
    assert design_warnings(load_pipeline(fixed)) == []


def test_the_shipped_example_pipeline_gets_no_design_warning():
    assert design_warnings(load_pipeline(ROOT / "conf" / "homelab.toml", check_jobs=False, suites=False)) == []


def test_check_prints_the_warnings_before_running_and_lists_them_in_json(write):
    path = write()
    out = invoke("check", str(path))  # an empty ledger: nothing pending, no JVM
    assert out.exit_code == 0, out.output
    assert "warning: stage enrich inputs: joins 2 inputs" in out.stderr
    assert "warning: stage daily aggregate: aggregates" in out.stderr
    only = invoke("check", str(path), "--stage", "daily")
    assert "stage enrich inputs" not in only.stderr and "stage daily aggregate" in only.stderr
    listed = json.loads(invoke("check", str(path), "--json").stdout)
    assert [w["check"] for w in listed["warnings"]] == ["stage enrich inputs", "stage daily aggregate"]


def test_doctor_lists_the_design_warnings_beside_its_other_checks(write):
    path = write()
    pipeline = load_pipeline(path)
    found = _by_name(doctor_checks(pipeline.source, pipeline))
    assert found["stage enrich inputs"].state == "warn" and found["stage daily aggregate"].state == "warn"

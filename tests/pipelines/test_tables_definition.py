"""``[tables."name"]`` in a pipeline file: checked like ``Source.table``, created where topics are."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka import Source
from minikafka.errors import SchemaMismatchError
from minikafka.pipelines import PipelineDefinitionError, load_pipeline
from minikafka.pipelines.opening import open_source
from minikafka.pipelines.schema import check_shape

MODELS = "tests.pipelines.keyed_jobs"

TEXT = f"""
[pipeline]
source = "ledger.sqlite"

[topics."flights"]
model = "{MODELS}:Flight"
dedup = ["flight_id"]

[tables."carrier_day"]
model = "{MODELS}:CarrierDay"
key = ["carrier", "day"]
merge = {{ flights = "sum", max_delay = "max" }}
description = "flights and the longest delay per carrier and day"
freshness = "26h"
max_lag = 10

[[stages]]
name = "per_day"
job = "{MODELS}"
inputs = ["flights"]
outputs = ["carrier_day"]
"""


def write(tmp: Path, text: str = TEXT, replace: dict[str, str] | None = None) -> Path:
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp / "pipeline.toml"
    path.write_text(text)
    return path


def test_a_tables_entry_is_a_keyed_table_with_its_key_and_merge_functions(tmp_path):
    defn = load_pipeline(write(tmp_path))
    table = defn.topics["carrier_day"]
    assert table.is_table and table.table_key == ("carrier", "day")
    assert table.merge == {"flights": "sum", "max_delay": "max"}
    assert (table.freshness, table.max_lag) == (26 * 3600, 10)
    assert list(defn.tables) == ["carrier_day"] and not defn.topics["flights"].is_table


@pytest.mark.parametrize("replace, match", [
    ({'key = ["carrier", "day"]\n': ""}, r'tables."?carrier_day"?: missing key \'key\''),
    ({'key = ["carrier", "day"]': 'key = ["carrier", "date"]'},
     r'tables."?carrier_day"?.key: .*key field \'date\' is not a field of the model'),
    ({'flights = "sum"': 'flights = "avg"'}, r'tables."?carrier_day"?.merge: .*unknown merge function \'avg\''),
    ({'flights = "sum"': 'carrier = "max"'}, r'tables."?carrier_day"?.merge: .*merge field \'carrier\' is a key field'),
    ({'max_delay = "max"': 'nope = "max"'}, r'tables."?carrier_day"?.merge: .*merge field \'nope\' is not a field'),
    ({'description = "flights': 'dedup = ["carrier"]\ndescription = "flights'},
     r'tables."?carrier_day"?: unknown key \'dedup\''),
    ({'key = ["carrier", "day"]': 'key = 3'},
     r'tables."?carrier_day"?.key: expected a field name or a list of field names'),
])
def test_bad_tables_entries_name_the_table_and_the_key(tmp_path, replace, match):
    path = write(tmp_path, replace=replace)
    with pytest.raises(PipelineDefinitionError, match=match):
        load_pipeline(path)


def test_a_sum_merge_on_a_text_field_is_refused_naming_its_type(tmp_path):
    path = write(tmp_path, replace={'flights = "sum"': 'flights = "sum", carrier_name = "sum"'})
    with pytest.raises(PipelineDefinitionError, match="merge field 'carrier_name' is not a field"):
        load_pipeline(path)
    text = TEXT.replace(f'model = "{MODELS}:CarrierDay"', f'model = "{MODELS}:Flight"').replace(
        'key = ["carrier", "day"]', 'key = ["flight_id"]').replace(
        'merge = { flights = "sum", max_delay = "max" }', 'merge = { carrier = "sum" }')
    with pytest.raises(PipelineDefinitionError, match="merge 'sum' needs an int or float field; 'carrier' is str"):
        load_pipeline(write(tmp_path, text))


def test_a_name_in_both_topics_and_tables_is_an_error_naming_both(tmp_path):
    text = TEXT + f'\n[topics."carrier_day"]\nmodel = "{MODELS}:CarrierDay"\n'
    with pytest.raises(PipelineDefinitionError,
                       match=r'\'carrier_day\' is declared twice: as topics."carrier_day" and as tables."carrier_day"'):
        load_pipeline(write(tmp_path, text))


def test_the_schema_check_knows_the_tables_keys():
    problems = check_shape({"pipeline": {"source": "x"}, "tables": {"t": {"model": "a:B", "key": ["k"], "mrge": {}}}})
    assert problems == ['tables.t: unknown key \'mrge\' (did you mean \'merge\'?)']


def test_opening_the_pipeline_creates_its_tables_as_keyed_tables(tmp_path):
    defn = load_pipeline(write(tmp_path))
    with open_source(defn) as source:
        table = source.opened("carrier_day")
        assert table.table_key == ("carrier", "day") and table.merge == {"flights": "sum", "max_delay": "max"}
    with Source(str(defn.source)) as source:  # stored as a table in the catalog
        from minikafka.ledger.topics import keyed

        assert keyed.table_names(source.ledger.conn) == ["carrier_day"]


def test_a_tables_entry_over_a_stored_plain_topic_is_refused_before_anything_is_written(tmp_path):
    from tests.pipelines.keyed_jobs import CarrierDay

    defn = load_pipeline(write(tmp_path))
    with Source(str(defn.source), create=True) as source:
        source.topic("carrier_day", CarrierDay, dedup=None)
    with pytest.raises(SchemaMismatchError, match="exists as a plain topic"):
        open_source(defn)


def test_topics_shows_a_keyed_table_with_its_key_current_rows_and_superseded_versions(tmp_path):
    from click.testing import CliRunner

    from minikafka.cli import main

    defn = load_pipeline(write(tmp_path))
    with open_source(defn) as source:
        table = source.opened("carrier_day")
        table.upsert_many([{"carrier": "AA", "day": "2024-01-01", "flights": 1, "max_delay": 3},
                           {"carrier": "UA", "day": "2024-01-01", "flights": 1, "max_delay": 0}])
        table.upsert({"carrier": "AA", "day": "2024-01-01", "flights": 1, "max_delay": 9})
    runner = CliRunner()
    listed = runner.invoke(main, ["topics", "--pipeline", str(defn.path), "--json"])
    assert listed.exit_code == 0, listed.output
    import json

    by_name = {t["topic"]: t for t in json.loads(listed.output)}
    assert by_name["carrier_day"]["table"] == {"key": ["carrier", "day"], "merge": {"flights": "sum", "max_delay": "max"},
                                               "current": 2, "superseded": 1}
    assert "table" not in by_name["flights"]
    text = runner.invoke(main, ["topics", "--pipeline", str(defn.path)]).output
    assert "keyed table, key (carrier, day): 2 current row(s), 1 superseded version(s)" in text


def test_a_backfill_into_a_keyed_table_is_refused_before_anything_is_written(tmp_path):
    from minikafka.errors import BackfillError
    from minikafka.spark.loading.backfill import backfill

    defn = load_pipeline(write(tmp_path))
    dump = tmp_path / "days.jsonl"
    dump.write_text('{"carrier": "AA", "day": "2024-01-01", "flights": 1, "max_delay": 3}\n')
    with open_source(defn) as source:
        with pytest.raises(BackfillError, match="'carrier_day' is a keyed table: backfill appends rows"):
            backfill(None, source, "carrier_day", [dump], progress=None)
        assert source.opened("carrier_day").count() == 0


def test_the_console_shows_a_keyed_table_as_a_table(tmp_path):
    from starlette.testclient import TestClient

    from minikafka.console.app import create_app

    defn = load_pipeline(write(tmp_path))
    with open_source(defn) as source:
        source.opened("carrier_day").upsert({"carrier": "AA", "day": "2024-01-01", "flights": 1, "max_delay": 3})
    client = TestClient(create_app(str(defn.source)), base_url="http://127.0.0.1")
    page = client.get("/topics/carrier_day").text
    assert "keyed table, key (carrier, day): 1 current row(s), 0 superseded version(s)" in page
    assert "(keyed table: 1 current)" in client.get("/topics").text
    assert "keyed table" not in client.get("/topics/flights").text

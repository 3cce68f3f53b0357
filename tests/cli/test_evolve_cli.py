"""``minikafka evolve`` and the pipeline file's ``schema_changes``/``unknown_fields`` (issue 42 item 3)."""

from __future__ import annotations

import json
import sqlite3

from minikafka import Source
from tests.cli.helpers import invoke
from tests.ledger.evolve_models import Reading, ReadingV2

MODELS = "tests.ledger.evolve_models"


def seeded(path, n=3):
    with Source(str(path)) as src:
        src.topic("readings", Reading, dedup=("sensor",)).extend(
            [{"sensor": f"s{i}", "value": i} for i in range(n)])
    return str(path)


def columns(path):
    conn = sqlite3.connect(path)
    try:
        return [r[1] for r in conn.execute('PRAGMA table_info("readings")')]
    finally:
        conn.close()


def pipeline(tmp_path, model="ReadingV2", extra=""):
    p = tmp_path / "pipe.toml"
    p.write_text(f'[pipeline]\nsource = "l.sqlite"\n\n[topics.readings]\nmodel = "{MODELS}:{model}"\n'
                 f'dedup = ["sensor"]\n{extra}\n[topics.copies]\nmodel = "{MODELS}:Reading"\n\n'
                 '[[stages]]\nname = "copy"\njob = "tests.pipelines.failing_job"\ninputs = ["readings"]\n'
                 'outputs = ["copies"]\n')
    return str(p)


def test_evolve_adds_optional_fields_and_says_no_row_was_rewritten(tmp_path):
    path = seeded(tmp_path / "l.sqlite")
    out = invoke("evolve", "readings", "--source", path, "--model", f"{MODELS}:ReadingV2")
    assert out.exit_code == 0, out.output
    assert "add field 'unit' (str, TEXT), old rows read NULL" in out.output
    assert "3 field(s) added in" in out.output and "no row rewritten" in out.output
    assert columns(path)[-3:] == ["unit", "calibrated", "seen_at"]


def test_evolve_dry_run_writes_nothing(tmp_path):
    path = seeded(tmp_path / "l.sqlite")
    out = invoke("evolve", "readings", "--source", path, "--model", f"{MODELS}:ReadingV2", "--dry-run", "--json")
    assert out.exit_code == 0, out.output
    info = json.loads(out.output)
    assert info["kind"] == "additive" and info["applied"] is False
    assert "unit" not in columns(path)


def test_evolve_dry_run_of_a_retype_says_what_it_rewrites(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 5)
    out = invoke("evolve", "readings", "--source", path, "--model", f"{MODELS}:ReadingRetyped", "--dry-run")
    assert out.exit_code == 0, out.output
    assert "field 'value' retyped" in out.output and "rewrites all 5 row(s)" in out.output
    refused = invoke("evolve", "readings", "--source", path, "--model", f"{MODELS}:ReadingRetyped")
    assert refused.exit_code == 1 and "not an additive change, nothing was written" in refused.output


def test_evolve_takes_the_model_the_pipeline_declares(tmp_path):
    seeded(tmp_path / "l.sqlite")
    out = invoke("evolve", "readings", "--pipeline", pipeline(tmp_path))
    assert out.exit_code == 0, out.output
    assert "unit" in columns(str(tmp_path / "l.sqlite"))


def test_evolve_without_a_model_is_a_usage_error(tmp_path):
    path = seeded(tmp_path / "l.sqlite")
    out = invoke("evolve", "readings", "--source", path)
    assert out.exit_code == 2 and "which model?" in out.output


def test_ingest_with_an_added_field_stops_naming_the_field_and_the_evolve_command(tmp_path):
    seeded(tmp_path / "l.sqlite")
    feed = tmp_path / "f.jsonl"
    feed.write_text('{"sensor": "x", "value": 1, "unit": "C"}\n')
    out = invoke("ingest", pipeline(tmp_path), "readings", feed)
    assert out.exit_code == 1
    assert "field 'unit' added" in out.output and "minikafka evolve readings" in out.output


def test_ingest_with_schema_changes_evolve_adds_the_fields_on_the_fly(tmp_path):
    seeded(tmp_path / "l.sqlite")
    feed = tmp_path / "f.jsonl"
    feed.write_text('{"sensor": "x", "value": 1, "unit": "C"}\n')
    out = invoke("ingest", pipeline(tmp_path, extra='schema_changes = "evolve"\n'), "readings", feed)
    assert out.exit_code == 0, out.output
    with Source(str(tmp_path / "l.sqlite")) as src:
        rows = {r.sensor: r for r in src.topic("readings", ReadingV2, dedup=("sensor",)).iter_new()}
    assert rows["x"].unit == "C" and rows["s0"].unit is None


def test_ingest_unknown_field_drop_warns_once_with_a_count(tmp_path, caplog):
    seeded(tmp_path / "l.sqlite")
    feed = tmp_path / "f.jsonl"
    feed.write_text("".join(json.dumps({"sensor": f"x{i}", "value": i, "colour": "red"}) + "\n" for i in range(4)))
    out = invoke("ingest", pipeline(tmp_path, model="Reading"), "readings", feed)
    assert out.exit_code == 0, out.output
    assert "4 appended" in out.output and "unknown field 'colour' dropped from 4 row(s)" in out.output
    warned = [r.getMessage() for r in caplog.records if "dropped unknown field" in r.getMessage()]
    assert len(warned) == 1 and "'colour' (4 rows)" in warned[0]


def test_ingest_unknown_field_quarantine_names_the_field(tmp_path):
    seeded(tmp_path / "l.sqlite")
    feed = tmp_path / "f.jsonl"
    feed.write_text('{"sensor": "ok", "value": 1}\n{"sensor": "x", "value": 2, "colour": "red"}\n')
    out = invoke("ingest", pipeline(tmp_path, model="Reading", extra='unknown_fields = "quarantine"\n'),
                 "readings", feed, "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["quarantined"] == 1
    with Source(str(tmp_path / "l.sqlite")) as src:
        (q,) = src.quarantined("readings")
    assert "unknown field 'colour'" in q["reason"] and q["origin"] == "f.jsonl:2"


def test_unknown_fields_evolve_on_a_model_that_drops_extras_is_a_pipeline_error(tmp_path):
    seeded(tmp_path / "l.sqlite")
    feed = tmp_path / "f.jsonl"
    feed.write_text('{"sensor": "ok", "value": 1}\n')
    out = invoke("ingest", pipeline(tmp_path, model="Reading", extra='unknown_fields = "evolve"\n'), "readings", feed)
    assert out.exit_code != 0
    assert 'topics."readings".unknown_fields' in out.output and 'extra="allow"' in out.output


def test_ingest_unknown_fields_evolve_keeps_the_field_and_quarantines_a_mistyped_one(tmp_path):
    feed = tmp_path / "f.jsonl"
    feed.write_text('{"sensor": "a", "value": 1, "colour": "red"}\n{"sensor": "b", "value": 2, "colour": 7}\n')
    out = invoke("ingest", pipeline(tmp_path, model="ReadingOpen", extra='unknown_fields = "evolve"\n'),
                 "readings", feed, "--json")
    assert out.exit_code == 0, out.output
    info = json.loads(out.output)
    assert (info["appended"], info["quarantined"]) == (1, 1)
    assert "colour" in columns(str(tmp_path / "l.sqlite"))
    with Source(str(tmp_path / "l.sqlite")) as src:
        (q,) = src.quarantined("readings")
    assert "field 'colour': 7 is not a str" in q["reason"]

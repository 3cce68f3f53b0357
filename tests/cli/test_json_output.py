"""Every JSON the CLI prints is strict JSON: datetimes in the ledger's stored form (what --where
takes), infinite floats as the strings "Infinity"/"-Infinity" (read back as floats)."""

from __future__ import annotations

import json
import math
from datetime import date, datetime, timezone

from pydantic import BaseModel

from minikafka import Source
from tests.cli.helpers import invoke


class Reading(BaseModel):
    sensor: str
    at: datetime
    day: date
    value: float


ROWS = [
    {"sensor": "a", "at": datetime(2025, 1, 1, 0, 3, tzinfo=timezone.utc), "day": date(2025, 1, 1), "value": math.inf},
    {"sensor": "b", "at": datetime(2025, 1, 1, 0, 4, 5, 123456, tzinfo=timezone.utc), "day": date(2025, 1, 2),
     "value": -math.inf},
    {"sensor": "c", "at": datetime(2025, 1, 1, 0, 5, tzinfo=timezone.utc), "day": date(2025, 1, 3), "value": 1.5},
]


def seed_readings(path):
    with Source(path) as src:
        src.topic("readings", Reading, dedup=("sensor",)).extend(ROWS)
    return path


def strict(text: str):
    """json.loads that refuses the bare NaN/Infinity tokens strict JSON does not have."""
    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")
    return json.loads(text, parse_constant=refuse)


def test_show_prints_datetimes_as_stored_and_infinities_as_strings(db_path):
    seed_readings(db_path)
    out = invoke("show", "readings", "--source", db_path)
    assert out.exit_code == 0, out.output
    rows = [strict(line) for line in out.output.splitlines()]
    assert [r["at"] for r in rows] == ["2025-01-01T00:03:00.000000Z", "2025-01-01T00:04:05.123456Z",
                                       "2025-01-01T00:05:00.000000Z"]
    assert [r["day"] for r in rows] == ["2025-01-01", "2025-01-02", "2025-01-03"]
    assert [r["value"] for r in rows] == ["Infinity", "-Infinity", 1.5]
    assert rows[0]["_created_at"].endswith("Z") and "T" in rows[0]["_created_at"]
    with Source(db_path) as src:  # the printed form is the stored text
        stored = src._ledger.conn.execute(f'SELECT "at" FROM {src.layout("readings").table} ORDER BY "_id"')
        assert [r[0] for r in stored] == [r["at"] for r in rows]


def test_show_json_array_is_strict_json(db_path):
    seed_readings(db_path)
    out = invoke("show", "readings", "--json", "--source", db_path)
    assert out.exit_code == 0, out.output
    rows = strict(out.output)
    assert rows[1]["at"] == "2025-01-01T00:04:05.123456Z" and rows[1]["value"] == "-Infinity"


def test_a_printed_datetime_pastes_into_where(db_path):
    seed_readings(db_path)
    out = invoke("show", "readings", "--where", "at=2025-01-01T00:04:05.123456Z", "--source", db_path)
    assert out.exit_code == 0, out.output
    assert [strict(line)["sensor"] for line in out.output.splitlines()] == ["b"]


def test_export_jsonl_is_strict_json_and_ingests_back_with_the_same_values(db_path, tmp_path):
    seed_readings(db_path)
    dump = tmp_path / "readings.jsonl"
    assert invoke("export", "readings", "--format", "jsonl", dump, "--source", db_path).exit_code == 0
    lines = [strict(line) for line in dump.read_text().splitlines()]
    assert [r["value"] for r in lines] == ["Infinity", "-Infinity", 1.5]
    assert lines[0]["at"] == "2025-01-01T00:03:00.000000Z"
    other = tmp_path / "other.sqlite"
    with Source(other) as src:
        src.topic("readings", Reading, dedup=("sensor",))
    out = invoke("ingest", "--source", other, "readings", dump)
    assert out.exit_code == 0, out.output
    with Source(other) as src:
        back = [r.model_dump() for r in src.topic("readings", Reading, dedup=("sensor",)).iter_new()]
    assert back == ROWS

"""`minikafka export TOPIC DIR --incremental`: a directory of Parquet files that holds every row
of the topic once, brought up to date by each run, recorded in the ledger with a run row."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from minikafka import Source
from minikafka.cli import main
from tests.util.frozen import kill_when_frozen

pytest.importorskip("pyarrow")

REPO = Path(__file__).resolve().parents[2]


class Reading(BaseModel):
    n: int
    station: str
    value: float


def add(ledger: Path, first: int, count: int) -> None:
    with Source(str(ledger)) as source:
        source.topic("weather.readings", Reading, dedup=("n",)).extend(
            [{"n": i, "station": "ab"[i % 2], "value": i / 4} for i in range(first, first + count)])


def exported(directory: Path) -> list[tuple]:
    import pyarrow.dataset as ds

    table = ds.dataset(directory, format="parquet", partitioning="hive").to_table()
    return sorted(zip(table["_id"].to_pylist(), table["n"].to_pylist(), table["station"].to_pylist(),
                      table["value"].to_pylist()))


def in_topic(ledger: Path) -> list[tuple]:
    with Source(str(ledger)) as source:
        rows = source.topic("weather.readings", Reading, dedup=("n",)).read_since(0, limit=100_000)
    return sorted((r.id, r.data.n, r.data.station, r.data.value) for r in rows)


def export(ledger: Path, *args) -> object:
    return CliRunner().invoke(main, ["export", "weather.readings", *map(str, args), "--source", str(ledger)])


def test_each_incremental_export_writes_only_the_new_rows_partitioned_and_records_a_run(tmp_path):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "exports" / "readings"
    add(ledger, 0, 30)
    first = export(ledger, out, "--incremental", "--partition-by", "station")
    assert first.exit_code == 0, first.output
    assert f"exported 30 new row(s) of weather.readings to {out} (partitioned by station)" in first.output
    assert sorted(p.name for p in out.iterdir()) == ["station=a", "station=b"]
    again = export(ledger, out, "--incremental", "--partition-by", "station")
    assert "exported nothing new" in again.output and "up to id 30" in again.output
    add(ledger, 30, 7)
    third = export(ledger, out, "--incremental", "--partition-by", "station")
    assert "exported 7 new row(s)" in third.output and "up to id 37" in third.output
    assert exported(out) == in_topic(ledger) and len(exported(out)) == 37  # each row once
    new_files = sorted(p.name for p in out.rglob("part-000000000031-*"))
    assert len(new_files) == 2  # the third run wrote files of ids 31..37 only, one per station
    with Source(str(ledger)) as source:
        runs = source.runs(stage="lake:weather_readings")
    assert [(r["status"], r["rows_out"]) for r in runs] == [("succeeded", 7), ("succeeded", 0), ("succeeded", 30)]


@pytest.mark.slow
def test_an_export_killed_after_writing_its_files_leaves_them_to_the_next_run_which_exports_each_row_once(tmp_path):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "readings"
    add(ledger, 0, 20)
    assert export(ledger, out, "--incremental").exit_code == 0
    add(ledger, 20, 15)
    env = dict(os.environ, MINIKAFKA_FREEZE_AT="lake:after-data-files", PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "export", "weather.readings", str(out),
                             "--incremental", "--source", str(ledger)], cwd=REPO, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    kill_when_frozen(proc)
    assert len(list(out.rglob("part-000000000021-*"))) == 1  # the dead attempt's file is there...
    with Source(str(ledger)) as source:  # ...but nothing of it is in the ledger: its transaction never committed
        assert [r["rows_out"] for r in source.runs(stage="lake:weather_readings")] == [20]
    rerun = export(ledger, out, "--incremental")
    assert rerun.exit_code == 0 and "exported 15 new row(s)" in rerun.output, rerun.output
    assert exported(out) == in_topic(ledger) and len(exported(out)) == 35  # ...and no row is there twice


def test_bad_incremental_exports_are_one_line_and_declare_nothing(tmp_path):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "readings"
    add(ledger, 0, 5)
    cases = [
        (["--incremental", "--partition-by", "nope"], "partition column 'nope' is not a field of topic"),
        (["--incremental", "--where", "n>1"], "--where and --status do not apply"),
        (["--incremental", "--format", "csv"], "--incremental writes Parquet files, not csv"),
        (["--partition-by", "station"], "add --incremental"),
    ]
    for args, message in cases:
        result = export(ledger, out, *args)
        assert result.exit_code != 0 and message in result.output, (args, result.output)
    assert not out.exists()
    with Source(str(ledger)) as source:
        from minikafka.ledger.lake import list_targets

        assert list_targets(source.ledger.conn) == []
    assert export(ledger, out, "--incremental").exit_code == 0
    other = export(ledger, tmp_path / "elsewhere", "--incremental")
    assert other.exit_code != 0 and "give this one another name with --name" in other.output
    named = export(ledger, tmp_path / "elsewhere", "--incremental", "--name", "readings_copy")
    assert named.exit_code == 0 and "exported 5 new row(s)" in named.output
    changed = export(ledger, out, "--incremental", "--partition-by", "station")
    assert changed.exit_code != 0 and "weather_readings" in changed.output
    plain_dir = export(ledger, out)
    assert plain_dir.exit_code != 0 and "is a directory" in plain_dir.output

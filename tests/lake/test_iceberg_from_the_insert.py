"""An Iceberg commit writes its data files from the rows the stage's commit stored, not read back."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("duckdb")

from minikafka import InvalidRecordError, Source  # noqa: E402
from minikafka.ledger.consuming import RunResult, new_run_id  # noqa: E402
from minikafka.ledger.lake import (  # noqa: E402
    IcebergTarget,
    declare,
    finishers_for,
    orphan_files,
    reader_catalog,
    remove_orphans,
    sync,
)
from minikafka.ledger.transactions import StagedOutput, commit_stage  # noqa: E402

from .readers import read_three_ways  # noqa: E402
from .test_iceberg_commit import Wide, ledger_rows, wide_rows  # noqa: E402


class Measured(Wide):
    ratio: float | None = None


def measured_rows(first: int, count: int) -> list[dict]:
    rows = wide_rows(first + count)[first:]
    for i, row in enumerate(rows, start=first):
        row["ratio"] = [float("nan"), -0.0, 1.5, None, float("inf")][i % 5]  # a NaN is stored as NULL, -0.0 as 0.0
    return rows


def staged_batch(layout, rows: list[dict]):
    """The rows in storage form as a stage's commit receives them: text in string columns,
    integers in int64 (bools as Arrow booleans), floats in float64, bytes in binary."""
    import pyarrow as pa

    encode = layout.encoder()
    values = list(zip(*(encode(Measured(**dict(r, ratio=None))) for r in rows)))  # the model refuses a NaN
    values[layout.field_names.index("ratio")] = [r["ratio"] for r in rows]  # a stage's batch may hold one
    types = {"TEXT": pa.string(), "INTEGER": pa.int64(), "REAL": pa.float64(), "BLOB": pa.binary()}
    arrays = []
    for col, column in zip(layout.columns, values):
        typ = pa.bool_() if col.kind == "bool" else types[col.sql_type]
        arrays.append(pa.array([bool(v) if typ == pa.bool_() and v is not None else v for v in column], typ))
    return pa.record_batch(arrays, names=layout.field_names)


def commit(ledger: str, batches: list) -> dict:
    """One stage-like commit of ``batches`` into topic ``m``; the run's ``lake`` details."""
    with Source(ledger) as source:
        topic = source.topic("m", Measured, dedup=("url",))
        run = RunResult(new_run_id("m"), "stage", stage="m", consumer="m", outputs=["m"])
        commit_stage(source.ledger, run, consumer="m", inputs=[], outputs=[StagedOutput(topic.layout, batches)],
                     finishers=finishers_for(source.ledger.conn, ["m"]))
        return run.details["lake"]


def make(tmp_path: Path, partition_by=("day(at)", "color")) -> tuple[str, object]:
    ledger = str(tmp_path / "l.db")
    with Source(ledger) as source:
        topic = source.topic("m", Measured, dedup=("url",))
        declare(source.ledger, [IcebergTarget("m", "m", str(tmp_path / "lake" / "m"), partition_by=partition_by)])
        return ledger, topic.layout


@pytest.mark.parametrize("partition_by", [("day(at)", "color"), ("level",), ()])
def test_a_stage_commit_writes_the_rows_it_stored_without_reading_them_back_and_the_table_equals_the_ledger(
        tmp_path, partition_by):
    ledger, layout = make(tmp_path, partition_by)
    rows = measured_rows(0, 40)
    lake = commit(ledger, [staged_batch(layout, rows[:25]), staged_batch(layout, rows[25:])])
    assert lake["m"]["rows"] == 40 and lake["m"]["read_back"] is False
    expected = ledger_rows(ledger, "m", Measured, ("url",))
    read = read_three_ways(ledger, "m")
    for name, (got, _types) in read.items():
        assert got == expected, name
    # the same rows read back from the ledger by a sync of a second table: the same table
    with Source(ledger) as source:
        again = IcebergTarget("again", "m", str(tmp_path / "lake" / "again"), partition_by=partition_by)
        declare(source.ledger, [again])
        assert sync(source.ledger, again).read_back is True
    mine, theirs = (reader_catalog(ledger).load_table(f"minikafka.{name}") for name in ("m", "again"))
    # one data file per partition, the same partitions, the same statistics readers prune by
    keep = ["partition", "record_count", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
            "upper_bounds"]
    files = [sorted(map(repr, t.inspect.files().select(keep).to_pylist())) for t in (mine, theirs)]
    assert files[0] == files[1]
    mine, theirs = (t.scan().to_arrow().sort_by("_id") for t in (mine, theirs))
    assert mine.schema == theirs.schema and mine.equals(theirs)
    ratios = mine.column("ratio").to_pylist()
    assert ratios[:5] == [None, 0.0, 1.5, None, float("inf")] and str(ratios[1]) == "0.0"


def test_a_commit_that_skipped_duplicates_reads_its_rows_back_and_the_table_equals_the_ledger(tmp_path):
    ledger, layout = make(tmp_path)
    rows = measured_rows(0, 30)
    assert commit(ledger, [staged_batch(layout, rows[:10])])["m"]["read_back"] is False
    lake = commit(ledger, [staged_batch(layout, rows[5:30])])  # rows 5..9 are stored already
    assert lake["m"]["rows"] == 20 and lake["m"]["read_back"] is True
    with Source(ledger) as source:  # rows appended outside a stage: the next commit reads them back too
        source.topic("m", Measured, dedup=("url",)).extend([Measured(**r) for r in measured_rows(30, 3)
                                                            if r["ratio"] is None or r["ratio"] == r["ratio"]])
    lake = commit(ledger, [staged_batch(layout, measured_rows(40, 5))])
    assert lake["m"]["read_back"] is True
    expected = ledger_rows(ledger, "m", Measured, ("url",))
    assert len(expected) == 30 + lake["m"]["rows"]
    for name, (got, _types) in read_three_ways(ledger, "m").items():
        assert got == expected, name


def test_a_commit_that_fails_while_inserting_leaves_no_data_file_and_the_table_as_it_was(tmp_path):
    import pyarrow as pa

    ledger, layout = make(tmp_path)
    commit(ledger, [staged_batch(layout, measured_rows(0, 10))])
    before = reader_catalog(ledger).load_table("minikafka.m").metadata_location
    files = sorted(p for p in (tmp_path / "lake" / "m").rglob("*") if p.is_file())
    bad = staged_batch(layout, measured_rows(20, 5))
    bad = bad.set_column(layout.field_names.index("at"), "at", pa.array(["not a time"] * 5, pa.string()))
    with pytest.raises(InvalidRecordError):
        commit(ledger, [staged_batch(layout, measured_rows(10, 10)), bad])
    assert sorted(p for p in (tmp_path / "lake" / "m").rglob("*") if p.is_file()) == files
    assert reader_catalog(ledger).load_table("minikafka.m").metadata_location == before
    with Source(ledger) as source, source.ledger.atomic() as conn:
        assert orphan_files(conn, "m") == []
    assert read_three_ways(ledger, "m")["pyiceberg"][0] == ledger_rows(ledger, "m", Measured, ("url",))


def test_rows_of_a_type_sqlite_would_change_are_read_back(tmp_path):
    """A staged column whose Arrow type SQLite stores converted (integers in a REAL column)
    is not converted here: the rows are read back, the table equals the ledger."""
    import pyarrow as pa

    ledger, layout = make(tmp_path)
    batch = staged_batch(layout, measured_rows(0, 6))
    i = layout.field_names.index("ratio")
    batch = batch.set_column(i, "ratio", pa.array([1, None, 3, 4, None, 2**60], pa.int64()))
    lake = commit(ledger, [batch])
    assert lake["m"]["read_back"] is True
    assert read_three_ways(ledger, "m")["pyiceberg"][0] == ledger_rows(ledger, "m", Measured, ("url",))


def test_a_dated_row_keeps_its_microseconds_and_zone(tmp_path):
    ledger, layout = make(tmp_path)
    commit(ledger, [staged_batch(layout, measured_rows(0, 3))])
    at = reader_catalog(ledger).load_table("minikafka.m").scan().to_arrow().sort_by("_id").column("at").to_pylist()
    assert at[1] == dt.datetime(2024, 1, 2, 12, 0, 0, 123457, tzinfo=dt.UTC)
    price = reader_catalog(ledger).load_table("minikafka.m").scan().to_arrow().sort_by("_id").column("price")
    assert price.to_pylist()[2] == decimal.Decimal("12345678901234567.000000000000000001") * 2


@pytest.mark.slow
def test_kill_9_while_data_files_are_written_beside_the_insert_then_a_rerun_leaves_the_lake_equal_to_the_ledger(
        tmp_path):
    """Killed once the outputs are inserted, the worker thread having written row groups of
    data files not yet in any snapshot: the re-run commits the rows once, and the half-written
    files are orphans that the cleanup finds."""
    from .lake_writer import add_rows, copy_pending, make_ledger
    from .test_iceberg_commit import dst_rows, kill_at, lake_rows

    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location, src_rows=40)
    copy_pending(ledger)
    with Source(ledger) as source:
        add_rows(source, 40, 60)
    data = Path(location) / "data"
    committed = set(data.rglob("*.parquet"))
    kill_at(ledger, "commit:outputs-inserted", "4",  # rows per row group: a file per partition is open
            once=lambda: len(set(data.rglob("*.parquet")) - committed) == 3)
    assert len(dst_rows(ledger)) == 40 and lake_rows(ledger) == dst_rows(ledger)
    with Source(ledger) as source, source.ledger.atomic() as conn:
        orphans = orphan_files(conn, "dst")
    assert any(p.endswith(".parquet") for p in orphans)
    assert copy_pending(ledger) == 60
    assert [r[0] for r in lake_rows(ledger)] == list(range(1, 101)) and lake_rows(ledger) == dst_rows(ledger)
    with Source(ledger) as source:
        assert sorted(remove_orphans(source.ledger, "dst")) == sorted(orphans)
    read = read_three_ways(ledger, "dst")
    assert read["duckdb"] == read["polars"] == read["pyiceberg"] == (dst_rows(ledger), read["pyiceberg"][1])

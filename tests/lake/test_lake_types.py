"""Every type a model holds, through a Delta table and a Parquet export: the same rows and Arrow
types back from each reader (the Iceberg table's test is test_iceberg_commit's)."""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from minikafka import Source  # noqa: E402
from minikafka.ledger.lake import DeltaTarget, ParquetTarget, declare, remove_orphans, sync  # noqa: E402

from .readers import duckdb_connection, logical  # noqa: E402
from .test_iceberg_commit import Wide, ledger_rows, wide_rows  # noqa: E402


class Wider(Wide):
    key: uuid.UUID
    counts: dict[str, int]


TYPES = [("_id", "int64"), ("url", "string"), ("n", "int64"), ("score", "double"), ("ok", "bool"),
         ("at", "timestamp[us, tz=UTC]"), ("day", "date32[day]"), ("price", "decimal128(38, 18)"),
         ("color", "string"), ("level", "int64"), ("tags", "string"), ("inner", "string"), ("blob", "binary"),
         ("note", "string"), ("key", "string"), ("counts", "string")]


def wider_rows(count: int) -> list[dict]:
    return [dict(row, key=uuid.UUID(int=i * 7919 + 1), counts={"a": i, "b b": -i}) for i, row in
            enumerate(wide_rows(count))]


def expected_rows(ledger: str) -> list[tuple]:
    """The topic's rows as a lake holds them (a UUID as its text, as the ledger stores it)."""
    return [tuple(str(v) if isinstance(v, uuid.UUID) else v for v in row)
            for row in ledger_rows(ledger, "wide", Wider, ("url",))]


def as_read(table) -> tuple[list, list]:
    import pyarrow as pa

    names = [name for name, _ in TYPES]
    table = pa.table(table).select(names)  # pa.table: an arro3 table too (Arrow's C interface)
    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}  # DataFusion's layout of the same values
    table = table.cast(pa.schema([f.with_type(views.get(f.type, f.type)) for f in table.schema])).sort_by("_id")
    return [tuple(r.values()) for r in table.to_pylist()], [(f.name, logical(f.type)) for f in table.schema]


def filled(tmp_path, target) -> str:
    ledger = str(tmp_path / "l.db")
    with Source(ledger) as source:
        source.topic("wide", Wider, dedup=("url",)).extend(wider_rows(7))
        declare(source.ledger, [target])
        assert sync(source.ledger, target).rows == 7
        source.topic("wide", Wider, dedup=("url",)).extend(wider_rows(11)[7:])
        assert sync(source.ledger, target).rows == 4  # a second commit, so readers merge two
    return ledger


def test_every_type_reads_back_the_same_from_a_delta_table_by_deltalake_pyarrow_polars_and_duckdb(tmp_path):
    import polars as pl
    from deltalake import DeltaTable, QueryBuilder

    location = str(tmp_path / "lake" / "wide")
    ledger = filled(tmp_path, DeltaTarget("wide", "wide", location, partition_by=("day", "level", "note")))
    table = DeltaTable(location)
    con = duckdb_connection()
    read = {
        "deltalake": as_read(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all()),
        "pyarrow": as_read(table.to_pyarrow_dataset().to_table()),
        "polars": as_read(pl.read_delta(location).to_arrow()),
        "duckdb": as_read(con.sql(f"SELECT * FROM delta_scan('{location}')").fetch_arrow_table()),
    }
    expected = expected_rows(ledger)
    assert len(expected) == 11
    for name, (rows, types) in read.items():
        assert types == TYPES, name
        assert rows == expected, name
    with Source(ledger) as source:  # partition values with spaces and nulls: every file is the log's
        assert remove_orphans(source.ledger, "wide", dry_run=True) == []


def test_every_type_reads_back_the_same_from_a_parquet_export_by_pyarrow_polars_and_duckdb(tmp_path):
    import polars as pl
    import pyarrow as pa
    import pyarrow.dataset as ds

    location = str(tmp_path / "out")
    ledger = filled(tmp_path, ParquetTarget("wide", "wide", location, partition_by=("color",)))
    partitioning = ds.partitioning(pa.schema([("color", pa.string())]), flavor="hive")
    con = duckdb_connection()
    read = {
        "pyarrow": as_read(ds.dataset(location, format="parquet", partitioning=partitioning).to_table()),
        "polars": as_read(pl.read_parquet(f"{location}/**/*.parquet", hive_partitioning=True).to_arrow()),
        "duckdb": as_read(con.sql(f"SELECT * FROM read_parquet('{location}/**/*.parquet', hive_partitioning = true)")
                          .fetch_arrow_table()),
    }
    expected = expected_rows(ledger)
    for name, (rows, types) in read.items():
        assert types == TYPES, name
        assert rows == expected, name
    with Source(ledger) as source:
        assert remove_orphans(source.ledger, "wide", dry_run=True) == []

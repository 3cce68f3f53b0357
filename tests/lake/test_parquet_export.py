"""Incremental, partitioned Parquet exports: only the rows new since the last export, each once."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka import Source
from minikafka.ledger.lake import ParquetTarget, declare, sync

from .lake_writer import add_rows, copy_pending, make_ledger
from .readers import duckdb_connection
from .test_iceberg_commit import dst_rows, kill_at


def exported(location: str) -> list[tuple]:
    import polars as pl

    con = duckdb_connection()
    by_duckdb = con.sql(f"SELECT _id, n, text, bucket FROM read_parquet('{location}/**/*.parquet', "
                        "hive_partitioning = true) ORDER BY _id").fetchall()
    by_polars = pl.read_parquet(f"{location}/**/*.parquet", hive_partitioning=True).sort("_id")
    assert [tuple(r) for r in by_polars.select(["_id", "n", "text", "bucket"]).iter_rows()] == by_duckdb
    return by_duckdb


def test_each_commit_exports_only_its_new_rows_into_hive_partitions(tmp_path):
    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "out")
    make_ledger(ledger, location, src_rows=30, parquet=True)
    assert copy_pending(ledger) == 30
    with Source(ledger) as source:
        add_rows(source, 30, 9)
    assert copy_pending(ledger) == 9
    assert exported(location) == dst_rows(ledger)
    names = sorted(p.relative_to(location).as_posix() for p in Path(location).rglob("*.parquet"))
    assert names == [f"bucket={b}/part-{a:012d}-{z:012d}-0.parquet" for b in range(3) for a, z in ((1, 30), (31, 39))]
    with Source(ledger) as source:
        assert sync(source.ledger, ParquetTarget("dst", "dst", location, ("bucket",))).rows == 0  # nothing twice


@pytest.mark.slow
@pytest.mark.parametrize("point", ["lake:before-data-files", "lake:after-data-files", "commit:after-commit"])
def test_kill_9_during_an_export_then_a_rerun_leaves_each_row_in_one_file(tmp_path, point):
    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "out")
    make_ledger(ledger, location, src_rows=20, parquet=True)
    copy_pending(ledger)
    with Source(ledger) as source:
        add_rows(source, 20, 10)
    kill_at(ledger, point)
    with Source(ledger) as source:
        add_rows(source, 30, 5)  # more rows before the re-run: the dead attempt's files name another range
    copy_pending(ledger)
    rows = exported(location)
    assert rows == dst_rows(ledger)
    assert [r[0] for r in rows] == list(range(1, 36))


def test_a_parquet_export_refuses_an_object_store_uri_and_unknown_partition_columns(tmp_path):
    from minikafka import LakeConfigError

    with pytest.raises(LakeConfigError, match="needs a local directory"):
        ParquetTarget("p", "dst", "s3://bucket/x")
    ledger = str(tmp_path / "l.db")
    make_ledger(ledger, str(tmp_path / "lake" / "dst"))
    with Source(ledger) as source, pytest.raises(LakeConfigError, match="'nope' is not a field"):
        declare(source.ledger, [ParquetTarget("p", "dst", str(tmp_path / "p"), ("nope",))])

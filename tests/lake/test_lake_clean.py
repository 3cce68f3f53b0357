"""``lake clean`` per format: it deletes the files of attempts that did not commit, and never a
file a Delta table's log or a Parquet export's committed range holds."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from minikafka import Source  # noqa: E402
from tests.cli.helpers import invoke  # noqa: E402

from .lake_writer import add_rows, copy_pending, make_ledger  # noqa: E402
from .test_iceberg_commit import dst_rows, kill_at  # noqa: E402


def files_under(location: str) -> set[str]:
    return {str(p) for p in Path(location).rglob("*") if p.is_file()}


def clean(ledger: str, *, dry_run: bool) -> list[str]:
    """``minikafka lake clean dst`` (the CLI); returns the files it names."""
    out = invoke("lake", "clean", "dst", *(["--dry-run"] if dry_run else []), "-s", ledger)
    assert out.exit_code == 0, out.output
    return [line.split(" ", 2)[-1] for line in out.output.splitlines() if line.startswith(("would delete", "deleted"))]


def delta_read(location: str) -> list[tuple]:
    """The Delta table's rows by deltalake, polars and pyarrow (the files the log names), which agree."""
    import polars as pl
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    table = DeltaTable(location)
    by_deltalake = table.to_pyarrow_table().sort_by("_id").select(["_id", "n", "text", "bucket"])
    by_polars = pl.read_delta(location).sort("_id").select(["_id", "n", "text", "bucket"]).to_arrow()
    by_pyarrow = ds.dataset(table.file_uris(), format="parquet").to_table().sort_by("_id")
    rows = [tuple(r.values()) for r in by_deltalake.to_pylist()]
    assert rows == [tuple(r.values()) for r in by_polars.to_pylist()]
    assert [r["_id"] for r in by_pyarrow.to_pylist()] == [r[0] for r in rows]
    return rows


def parquet_read(location: str) -> list[tuple]:
    """The export's rows by pyarrow and polars (hive partitions), which agree."""
    import polars as pl
    import pyarrow.dataset as ds

    by_pyarrow = ds.dataset(location, format="parquet", partitioning="hive").to_table().sort_by("_id")
    by_polars = pl.read_parquet(f"{location}/**/*.parquet", hive_partitioning=True).sort("_id")
    rows = [(r["_id"], r["n"], r["text"], r["bucket"]) for r in by_pyarrow.to_pylist()]
    assert rows == [tuple(r) for r in by_polars.select(["_id", "n", "text", "bucket"]).iter_rows()]
    return rows


def test_lake_clean_of_a_delta_table_keeps_every_file_its_log_holds_even_removed_ones(tmp_path):
    from deltalake import DeltaTable

    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location, src_rows=12, delta=True)
    copy_pending(ledger)
    with Source(ledger) as source:
        add_rows(source, 12, 9)
    copy_pending(ledger)
    DeltaTable(location).optimize.compact()  # the replaced files stay for time travel: removed, not orphans
    DeltaTable(location).create_checkpoint()
    for commit in Path(location, "_delta_log").glob("0000*.json"):
        commit.unlink()  # the commits only in the checkpoint now: its add and remove actions count
    before = files_under(location)
    rows = delta_read(location)
    assert clean(ledger, dry_run=True) == []
    assert clean(ledger, dry_run=False) == []
    assert files_under(location) == before
    assert delta_read(location) == rows == dst_rows(ledger) and len(rows) == 21
    assert DeltaTable(location, version=2).to_pyarrow_table().num_rows == 21  # time travel still reads


def test_lake_clean_of_a_parquet_export_keeps_the_committed_files_and_deletes_a_killed_attempts(tmp_path):
    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "out")
    make_ledger(ledger, location, src_rows=20, parquet=True)
    copy_pending(ledger)
    committed = files_under(location)
    with Source(ledger) as source:
        add_rows(source, 20, 10)
    kill_at(ledger, "lake:after-data-files")  # the attempt's files written, its ledger commit never made
    attempt = files_under(location) - committed
    assert attempt and all("part-000000000021-000000000030" in p for p in attempt)
    assert sorted(clean(ledger, dry_run=True)) == sorted(attempt)
    assert files_under(location) == committed | attempt  # a dry run deletes nothing
    assert sorted(clean(ledger, dry_run=False)) == sorted(attempt)
    assert files_under(location) == committed
    assert parquet_read(location) == dst_rows(ledger) and len(dst_rows(ledger)) == 20
    assert clean(ledger, dry_run=True) == []
    copy_pending(ledger)  # the re-run exports the rows the killed attempt did not commit, once
    assert parquet_read(location) == dst_rows(ledger) and len(dst_rows(ledger)) == 30
    assert clean(ledger, dry_run=True) == []


@pytest.mark.slow
def test_lake_clean_of_a_delta_table_deletes_the_data_files_of_an_attempt_killed_before_its_delta_commit(tmp_path):
    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location, src_rows=12, delta=True)
    copy_pending(ledger)
    committed = files_under(location)
    with Source(ledger) as source:
        add_rows(source, 12, 6)
    kill_at(ledger, "lake:after-data-files")  # its Parquet files written, no Delta commit names them
    attempt = files_under(location) - committed
    assert len(attempt) == 3 and all(p.endswith(".parquet") for p in attempt)  # one per bucket
    assert sorted(clean(ledger, dry_run=True)) == sorted(attempt)
    assert files_under(location) == committed | attempt
    assert sorted(clean(ledger, dry_run=False)) == sorted(attempt)
    assert files_under(location) == committed
    assert delta_read(location) == dst_rows(ledger) and len(dst_rows(ledger)) == 12
    copy_pending(ledger)  # the re-run writes the rows once, in files of its own
    assert delta_read(location) == dst_rows(ledger) and len(dst_rows(ledger)) == 18
    assert clean(ledger, dry_run=True) == []

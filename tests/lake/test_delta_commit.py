"""Delta targets: an app transaction per write, checked before writing, so a re-run after a
crash between the Delta commit and the ledger's commit writes nothing twice."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("deltalake")

from minikafka import LakeConfigError, Source  # noqa: E402
from minikafka.ledger.lake import DeltaTarget, declare, remove_orphans  # noqa: E402

from .lake_writer import add_rows, copy_pending, make_ledger  # noqa: E402
from .test_iceberg_commit import dst_rows, kill_at  # noqa: E402


def delta_rows(location: str) -> list[tuple]:
    import polars as pl
    from deltalake import DeltaTable

    by_deltalake = DeltaTable(location).to_pyarrow_table().sort_by("_id")
    by_polars = pl.read_delta(location).sort("_id").to_arrow()
    rows = [tuple(r.values()) for r in by_deltalake.select(["_id", "n", "text", "bucket"]).to_pylist()]
    assert rows == [tuple(r.values()) for r in by_polars.select(["_id", "n", "text", "bucket"]).to_pylist()]
    assert str(by_deltalake.schema.field("_id").type) == "int64"
    return rows


def test_a_stage_commit_appends_its_outputs_to_the_delta_table_with_its_app_transaction(tmp_path):
    from deltalake import DeltaTable

    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location, src_rows=20, delta=True)
    assert copy_pending(ledger) == 20
    with Source(ledger) as source:
        add_rows(source, 20, 10)
    assert copy_pending(ledger) == 10
    assert delta_rows(location) == dst_rows(ledger) and len(dst_rows(ledger)) == 30
    assert DeltaTable(location).transaction_version("minikafka:dst") == 30


DELTA_POINTS = ["lake:before-data-files", "lake:after-data-files", "lake:after-delta-commit", "commit:after-commit"]


@pytest.mark.slow
@pytest.mark.parametrize("point", DELTA_POINTS)
def test_kill_9_around_the_delta_commit_then_a_rerun_writes_every_row_once(tmp_path, point):
    from .readers import read_delta_three_ways

    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location, src_rows=15, delta=True)
    copy_pending(ledger)
    with Source(ledger) as source:
        add_rows(source, 15, 12)
    before = {str(p) for p in Path(location).rglob("*.parquet")}
    kill_at(ledger, point)
    attempt = sorted(str(p) for p in Path(location).rglob("*.parquet") if str(p) not in before)
    assert bool(attempt) == (point != "lake:before-data-files")  # its data files are on disk from then on
    assert len(dst_rows(ledger)) == (27 if point == "commit:after-commit" else 15)
    with Source(ledger) as source:  # an attempt killed before its Delta commit left orphans: clean finds them
        assert remove_orphans(source.ledger, "dst") == (attempt if point == "lake:after-data-files" else [])
    copy_pending(ledger)  # the re-run: after the Delta commit it finds the app transaction and skips the write
    rows = delta_rows(location)
    assert rows == dst_rows(ledger)
    assert [r[0] for r in rows] == list(range(1, 28))  # zero missing, zero duplicates
    read = read_delta_three_ways(location)
    assert read["deltalake"] == read["polars"] == read["duckdb"]
    assert read["deltalake"][0] == dst_rows(ledger)
    with Source(ledger) as source:
        assert remove_orphans(source.ledger, "dst", dry_run=True) == []


def test_a_delta_partition_on_a_bytes_column_is_refused_naming_it(tmp_path):
    from .test_iceberg_commit import Wide

    ledger = str(tmp_path / "l.db")
    with Source(ledger) as source:
        source.topic("wide", Wide, dedup=("url",))
        with pytest.raises(LakeConfigError, match="partition column 'blob' holds bytes"):
            declare(source.ledger, [DeltaTarget("w", "wide", str(tmp_path / "w"), partition_by=("blob",))])


def test_a_delta_partition_transform_or_unknown_column_is_refused(tmp_path):
    with pytest.raises(LakeConfigError, match="names columns, not 'day\\(at\\)'"):
        DeltaTarget("d", "dst", str(tmp_path / "d"), partition_by=("day(at)",))
    ledger = str(tmp_path / "l.db")
    make_ledger(ledger, str(tmp_path / "lake" / "dst"))
    with Source(ledger) as source, pytest.raises(LakeConfigError, match="'nope' is not a field of topic 'dst'"):
        declare(source.ledger, [DeltaTarget("d", "dst", str(tmp_path / "d"), partition_by=("nope",))])

"""Iceberg tables whose catalog lives in the ledger: the pointer swap commits with the stage."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

pytest.importorskip("pyiceberg")
pytest.importorskip("duckdb")

from minikafka import ConcurrentRunError, LakeConfigError, Source  # noqa: E402
from minikafka.ledger.lake import (  # noqa: E402
    IcebergTarget,
    declare,
    orphan_files,
    reader_catalog,
    remove_orphans,
    sync,
)

from .lake_writer import Item, add_rows, copy_pending, make_ledger  # noqa: E402
from .readers import read_three_ways  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


class Color(enum.Enum):
    red = "red"
    blue = "blue"


class Level(enum.IntEnum):
    low = 1
    high = 2


class Inner(BaseModel):
    a: int


class Wide(BaseModel):
    url: str
    n: int
    score: float
    ok: bool
    at: dt.datetime
    day: dt.date
    price: decimal.Decimal
    color: Color
    level: Level
    tags: list[str]
    inner: Inner
    blob: bytes
    note: str | None = None


def wide_rows(count: int) -> list[dict]:
    return [dict(url=f"u{i}", n=(-1) ** i * (2**62 + i), score=i / 3, ok=i % 2 == 0,
                 at=dt.datetime(2024, 1, 1 + i % 3, 12, 0, 0, 123456 + i, tzinfo=dt.UTC),
                 day=dt.date(2024, 1, 1 + i % 3), price=decimal.Decimal("12345678901234567.000000000000000001") * i,
                 color="red" if i % 2 else "blue", level=1 + i % 2, tags=["a", str(i)], inner={"a": i},
                 blob=bytes([i % 256, 0, 255]), note=None if i % 2 else f"note {i}")
            for i in range(count)]


def ledger_rows(path: str, topic: str, model, dedup) -> list[tuple]:
    """The topic's committed rows as the lake holds them: ``_id``, then each field (enums as
    their value, nested values as the JSON text the ledger stores)."""
    with Source(path) as source:
        records = list(source.topic(topic, model, dedup=dedup).iter_new(records=True)) + \
            list(source.topic(topic, model, dedup=dedup).iter_handled(records=True))
    rows = []
    for r in records:
        values = []
        for _name, value in r.data:
            if isinstance(value, enum.Enum):
                value = value.value
            elif isinstance(value, BaseModel | list | dict):
                value = json.dumps(value.model_dump(mode="json") if isinstance(value, BaseModel) else value,
                                   separators=(",", ":"))
            values.append(value)
        rows.append((r.id, *values))
    return sorted(rows)


def test_types_are_exact_and_duckdb_polars_and_pyiceberg_read_back_the_same_rows_and_types(tmp_path):
    ledger = str(tmp_path / "l.db")
    with Source(ledger) as source:
        source.topic("wide", Wide, dedup=("url",)).extend(wide_rows(7))
        target = IcebergTarget("wide", "wide", str(tmp_path / "lake" / "wide"), partition_by=("day(at)", "color"))
        declare(source.ledger, [target])
        result = sync(source.ledger, target)
    assert result.rows == 7 and result.last_id == 7
    schema = reader_catalog(ledger).load_table("minikafka.wide").schema()
    assert [(f.name, str(f.field_type), f.required) for f in schema.fields] == [
        ("_id", "long", True), ("url", "string", True), ("n", "long", True), ("score", "double", True),
        ("ok", "boolean", True), ("at", "timestamptz", True), ("day", "date", True),
        ("price", "decimal(38, 18)", True), ("color", "string", True), ("level", "long", True),
        ("tags", "string", True), ("inner", "string", True), ("blob", "binary", True), ("note", "string", False)]
    read = read_three_ways(ledger, "wide")
    expected = ledger_rows(ledger, "wide", Wide, ("url",))
    for name, (rows, types) in read.items():
        assert rows == expected, name
        assert types == read["pyiceberg"][1], name
    assert dict(read["pyiceberg"][1])["at"] == "timestamp[us, tz=UTC]"
    assert dict(read["pyiceberg"][1])["price"] == "decimal128(38, 18)"


def lake_rows(ledger: str, table: str = "dst") -> list[tuple]:
    rows, _ = read_three_ways(ledger, table)["pyiceberg"]
    return rows


def dst_rows(ledger: str) -> list[tuple]:
    return ledger_rows(ledger, "dst", Item, ("n",))


def test_a_stage_commit_writes_its_outputs_to_the_iceberg_table_in_the_same_transaction(tmp_path):
    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location, src_rows=30)
    assert copy_pending(ledger) == 30
    with Source(ledger) as source:
        add_rows(source, 30, 20)
    assert copy_pending(ledger) == 20
    assert lake_rows(ledger) == dst_rows(ledger) and len(dst_rows(ledger)) == 50
    table = reader_catalog(ledger).load_table("minikafka.dst")
    assert len(table.metadata.snapshots) == 2
    assert table.metadata.current_snapshot().summary["minikafka.last-id"] == "50"
    with Source(ledger) as source:
        run = source.ledger.conn.execute("SELECT details FROM _minikafka_runs WHERE stage = 'copier' "
                                         "ORDER BY rowid DESC LIMIT 1").fetchone()[0]
    assert json.loads(run)["lake"]["dst"]["rows"] == 20
    assert json.loads(run)["lake"]["dst"]["read_back"] is False  # written from the insert


def test_a_rolled_back_commit_leaves_the_table_as_it_was_and_its_files_to_the_orphan_cleanup(tmp_path):
    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location, src_rows=10)
    copy_pending(ledger)
    before = reader_catalog(ledger).load_table("minikafka.dst").metadata_location

    def fail(conn, run):
        raise RuntimeError("a later finisher fails")

    with Source(ledger) as source:
        add_rows(source, 10, 5)
    with pytest.raises(RuntimeError, match="later finisher"):
        copy_pending(ledger, after=[fail])
    with Source(ledger) as source:
        with source.ledger.atomic() as conn:
            orphans = orphan_files(conn, "dst")
        assert orphans and any(p.endswith(".parquet") for p in orphans) and any(".metadata.json" in p for p in orphans)
        assert remove_orphans(source.ledger, "dst", dry_run=True) == orphans
        assert all(Path(p).exists() for p in orphans)  # a dry run deletes nothing
        assert remove_orphans(source.ledger, "dst") == orphans
        assert not any(Path(p).exists() for p in orphans)
        with source.ledger.atomic() as conn:
            assert orphan_files(conn, "dst") == []
    assert reader_catalog(ledger).load_table("minikafka.dst").metadata_location == before
    assert lake_rows(ledger) == dst_rows(ledger) and len(lake_rows(ledger)) == 10
    assert copy_pending(ledger) == 5  # the re-run commits the topic's and the table's rows once
    assert lake_rows(ledger) == dst_rows(ledger) and len(lake_rows(ledger)) == 15


POINTS = ["lake:before-data-files", "lake:after-data-files", "lake:after-metadata", "lake:after-pointer-swap",
          "commit:after-commit"]


def kill_at(ledger: str, point: str, *args: str, once=lambda: True) -> None:
    """Run the lake writer frozen at ``point``; kill -9 it there (once ``once()`` holds)."""
    env = dict(os.environ, MINIKAFKA_FREEZE_AT=point, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "tests.lake.lake_writer", ledger, *args], cwd=REPO, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.time() + 60
    for line in proc.stderr:
        if line.startswith("FROZEN") or time.time() > deadline:
            break
    while not once() and time.time() < deadline:
        time.sleep(0.01)  # another thread of the frozen process is still at work
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_kill_9_at_each_fault_point_then_a_rerun_leaves_the_lake_equal_to_the_ledger(tmp_path, point):
    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location, src_rows=40)
    copy_pending(ledger)  # the table exists with a snapshot: the killed commit is its second
    with Source(ledger) as source:
        add_rows(source, 40, 25)
    kill_at(ledger, point)
    committed = len(dst_rows(ledger))
    assert committed == (65 if point == "commit:after-commit" else 40)
    assert lake_rows(ledger) == dst_rows(ledger)  # before the re-run too: the table is the ledger's
    assert copy_pending(ledger) == 65 - committed
    rows = lake_rows(ledger)
    assert rows == dst_rows(ledger)
    assert [r[0] for r in rows] == list(range(1, 66))  # zero missing, zero duplicates
    with Source(ledger) as source:
        orphans = remove_orphans(source.ledger, "dst")
    assert bool(orphans) == (point in ("lake:after-data-files", "lake:after-metadata", "lake:after-pointer-swap"))
    read = read_three_ways(ledger, "dst")
    assert read["duckdb"] == read["polars"] == read["pyiceberg"]
    assert read["pyiceberg"][0] == dst_rows(ledger)


def test_a_target_whose_definition_changed_is_refused_naming_what_changed(tmp_path):
    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location)
    with Source(ledger) as source, pytest.raises(LakeConfigError, match="holds partition_by"):
        declare(source.ledger, [IcebergTarget("dst", "dst", location, partition_by=("n",))])


def test_a_partition_column_the_model_lacks_is_refused_before_anything_is_written(tmp_path):
    ledger = str(tmp_path / "l.db")
    make_ledger(ledger, str(tmp_path / "lake" / "dst"))
    with Source(ledger) as source, pytest.raises(LakeConfigError, match="'colour' is not a field of topic 'dst'"):
        declare(source.ledger, [IcebergTarget("other", "dst", str(tmp_path / "o"), partition_by=("day(colour)",))])
    assert not (tmp_path / "o").exists()
    with pytest.raises(LakeConfigError, match="partition_by 'bucket\\(n\\)'"):
        IcebergTarget("other", "dst", str(tmp_path / "o"), partition_by=("bucket(n)",))


def test_a_pointer_swap_from_a_stale_metadata_file_is_refused_and_the_pointer_stays(tmp_path):
    """The conditional UPDATE is the Iceberg commit: a writer that read an older pointer loses."""
    from minikafka.ledger.lake import CATALOG, state

    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location, src_rows=5)
    copy_pending(ledger)
    with Source(ledger) as source:
        current = reader_catalog(ledger).load_table("minikafka.dst").metadata_location
        with pytest.raises(ConcurrentRunError, match="committed by another writer"), source.ledger.atomic() as conn:
            state.swap_pointer_in_current_transaction(conn, CATALOG, "minikafka", "dst", current + ".older",
                                                      current + ".newer")
    assert reader_catalog(ledger).load_table("minikafka.dst").metadata_location == current
    assert lake_rows(ledger) == dst_rows(ledger) and len(dst_rows(ledger)) == 5


@pytest.mark.slow
def test_two_processes_writing_different_tables_of_one_catalog_at_once_both_commit(tmp_path):
    ledger = str(tmp_path / "l.db")
    with Source(ledger) as source:
        for name in ("left", "right"):
            source.topic(name, Item, dedup=("n",))
        declare(source.ledger, [IcebergTarget(name, name, str(tmp_path / "lake" / name)) for name in ("left", "right")])
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-m", "tests.lake.lake_writer", "race", ledger, name, "6"], cwd=REPO,
                              env=env, stderr=subprocess.PIPE, text=True) for name in ("left", "right")]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    for name in ("left", "right"):
        rows = lake_rows(ledger, name)
        assert rows == ledger_rows(ledger, name, Item, ("n",)) and len(rows) == 300
        assert len(reader_catalog(ledger).load_table(f"minikafka.{name}").metadata.snapshots) == 6


def test_compaction_leaves_one_file_per_partition_and_expiry_then_cleanup_removes_the_replaced_files(tmp_path):
    from datetime import UTC, datetime, timedelta

    from minikafka.ledger.lake import compact, expire_snapshots

    ledger, location = str(tmp_path / "l.db"), str(tmp_path / "lake" / "dst")
    make_ledger(ledger, location, src_rows=6)
    copy_pending(ledger)
    for night in range(1, 6):  # five nights, each a commit adding one file to each of the 3 partitions
        with Source(ledger) as source:
            add_rows(source, night * 6, 6)
        copy_pending(ledger)
    before = lake_rows(ledger)
    with Source(ledger) as source:
        planned = compact(source.ledger, "dst", dry_run=True)
        assert (planned.most_files_in_a_partition, planned.done) == (6, False)
        done = compact(source.ledger, "dst")
        assert (done.files_before, done.files_after, done.done) == (18, 3, True)
        assert compact(source.ledger, "dst").done is False  # nothing left to compact
        assert lake_rows(ledger) == before == dst_rows(ledger)
        assert remove_orphans(source.ledger, "dst", dry_run=True) == []  # old snapshots still refer to the files
        future = datetime.now(UTC) + timedelta(seconds=1)
        assert expire_snapshots(source.ledger, "dst", older_than=future, dry_run=True).snapshots_expired == 7
        assert expire_snapshots(source.ledger, "dst", older_than=future).done
        removed = remove_orphans(source.ledger, "dst")
        assert len([p for p in removed if p.endswith(".parquet")]) == 18
        kinds = [r[0] for r in source.ledger.conn.execute(
            "SELECT kind FROM _minikafka_runs WHERE kind LIKE 'lake-%' ORDER BY rowid")]
    assert kinds == ["lake-compact", "lake-compact", "lake-compact", "lake-clean", "lake-expire", "lake-expire",
                     "lake-clean"]
    read = read_three_ways(ledger, "dst")
    assert read["duckdb"] == read["polars"] == read["pyiceberg"] and read["pyiceberg"][0] == dst_rows(ledger)
    assert len(reader_catalog(ledger).load_table("minikafka.dst").metadata.snapshots) == 1

"""Benchmark lake tables: a stage's commit into an Iceberg output whose catalog lives in the ledger.

1. Commit ``--rows`` staged output rows (Arrow batches of storage values, as a stage's commit
   receives them from Spark) into a ledger topic deduplicated on ``url``, with their acks and
   run row: one ``commit_stage`` transaction with its COMMIT. The baseline.
2. The same rows, in a fresh ledger, into the same topic declared as an Iceberg target
   partitioned by ``day(published)`` (10 days): the commit also writes the Parquet data files
   from the rows it inserts (in a second thread, beside the insert), then the manifests and
   metadata, and swaps the pointer row, in the same transaction. Targets: >= 150,000 rows/s,
   and >= 0.5x step 1's rate. The finishers are built before the clock starts, as a stage
   builds them before its commit.
3. Read the table back with DuckDB (iceberg_scan, pinned extension wheels) and check the count.
4. An incremental export (a ``parquet`` target partitioned by ``bucket``, 10 values)
   of ``--new`` rows appended to a topic of ``--history`` rows that the target already holds
   (recorded as exported: what an earlier export wrote is not this figure), as ``lake sync``
   runs it: one transaction with its run row. Target: <= 2 s for 10,000 new rows of 10M.

Why the commits and not whole Spark stages: the Spark part of a stage (read, transform, the
staged write) is the same with or without a lake output and takes seconds of its own, so a
ratio of whole stages would be nearer 1; this ratio is the stricter one. No JVM starts.

5. ``--nights`` (365) nightly commits of ``--night-rows`` rows each into an Iceberg table
   partitioned by ``month(at)``, then ``compact``: target <= 2 files per partition, and a DuckDB
   scan (sum over every row) of the table within 1.5x a scan of one Parquet file of the same rows.

The scratch directory is removed at exit; exit status 1 when a target is missed.
Usage: python scripts/bench_lake.py [--rows 1000000] [--history 10000000] [--new 10000] [--nights 365]
       [--night-rows 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench_common import exit_code, scratch_dir
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minikafka import Source  # noqa: E402
from minikafka.ledger.consuming import RunResult  # noqa: E402
from minikafka.ledger.lake import IcebergTarget, ParquetTarget, declare, finishers_for, reader_catalog, state  # noqa: E402
from minikafka.ledger.lake import sync as lake_sync  # noqa: E402
from minikafka.ledger.transactions import StagedOutput, commit_stage  # noqa: E402
from minikafka.util.clock import format_timestamp  # noqa: E402

BATCH = 65_536
TARGET_RATE = 150_000
TARGET_RATIO = 0.5


class Scored(BaseModel):
    url: str
    title: str
    score: float
    rank: int
    published: datetime


def batches(rows: int):
    """Storage-form Arrow batches, as the stage's staged output hands them to the commit."""
    import pyarrow as pa

    start = datetime(2026, 11, 1, tzinfo=UTC)
    stamps = [format_timestamp(start + timedelta(days=d, seconds=s)) for d in range(10) for s in range(0, 86400, 864)]
    out = []
    for first in range(0, rows, BATCH):
        ids = range(first, min(rows, first + BATCH))
        out.append(pa.record_batch({
            "url": [f"https://example.org/items/{i:09d}" for i in ids],
            "title": [f"title of item {i}" for i in ids],
            "score": [i / 7 for i in ids],
            "rank": list(ids),
            "published": [stamps[(i * 7919) % len(stamps)] for i in ids],
        }))
    return out


def commit(path: Path, staged, *, lake: bool) -> float:
    with Source(str(path)) as source:
        topic = source.topic("rss.scored", Scored, dedup=("url",))
        if lake:
            declare(source.ledger, [IcebergTarget("scored", "rss.scored", str(path.parent / "lake" / "scored"),
                                                  partition_by=("day(published)",))])
        run = RunResult("bench", "stage", stage="score", consumer="score", outputs=["rss.scored"])
        # built before the commit, as a stage builds them (spark/stages/stage.py): pyiceberg's
        # import (about 0.7 s, once per process) is not part of a commit
        finishers = finishers_for(source.ledger.conn, ["rss.scored"])
        t0 = time.perf_counter()
        commit_stage(source.ledger, run, consumer="score", inputs=[], outputs=[StagedOutput(topic.layout, staged)],
                     finishers=finishers)
        seconds = time.perf_counter() - t0
        assert run.rows_out == sum(b.num_rows for b in staged), run
        assert not lake or run.details["lake"]["scored"]["read_back"] is False, run.details  # from the insert
    return seconds


class Event(BaseModel):
    url: str
    bucket: int
    score: float
    at: datetime


def export(work: Path, history: int, new: int) -> None:
    import pyarrow as pa

    path = work / "export" / "l.sqlite"
    path.parent.mkdir()
    at = format_timestamp(datetime(2026, 11, 1, tzinfo=UTC))
    t0 = time.perf_counter()
    with Source(str(path)) as source:
        topic = source.topic("events", Event, dedup=None)
        for first in range(0, history + new, 1_000_000):
            ids = range(first, min(history + new, first + 1_000_000))
            batch = pa.record_batch({"url": [f"https://e/{i}" for i in ids], "bucket": [i % 10 for i in ids],
                                     "score": [i / 3 for i in ids], "at": [at] * len(ids)})
            commit_stage(source.ledger, RunResult(f"load-{first}", "stage", stage="load", consumer="load"),
                         consumer="load", inputs=[], outputs=[StagedOutput(topic.layout, [batch])])
            if first + 1_000_000 >= history and first < history:  # the history is there: the target holds it
                target = ParquetTarget("events_export", "events", str(work / "export" / "out"), ("bucket",))
                declare(source.ledger, [target])
                with source.ledger.atomic() as conn:
                    state.record_sync_in_current_transaction(conn, "events_export", history, None, None, at)
        built = time.perf_counter() - t0
        t1 = time.perf_counter()
        result = lake_sync(source.ledger, target)
        seconds = time.perf_counter() - t1
    print(f"  incremental export of {result.rows:,} new rows of {history + new:,} (built in {built:.0f} s): "
          f"{seconds:6.2f} s in {result.data_files} files (target <= 2 s) {verdict(seconds <= 2 and result.rows == new)}")


def nights(work: Path, count: int, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from minikafka.ledger.lake import compact

    path = work / "nights" / "l.sqlite"
    path.parent.mkdir()
    t0 = time.perf_counter()
    with Source(str(path)) as source:
        topic = source.topic("events", Event, dedup=None)
        declare(source.ledger, [IcebergTarget("nightly", "events", str(work / "nights" / "t"), ("month(at)",))])
        for night in range(count):
            day = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=night)
            ids = range(night * rows, (night + 1) * rows)
            batch = pa.record_batch({"url": [f"https://e/{i}" for i in ids], "bucket": [i % 10 for i in ids],
                                     "score": [i / 3 for i in ids],
                                     "at": [format_timestamp(day + timedelta(seconds=i % 86400)) for i in ids]})
            commit_stage(source.ledger, RunResult(f"night-{night}", "stage", stage="nightly", consumer="nightly"),
                         consumer="nightly", inputs=[], outputs=[StagedOutput(topic.layout, [batch])],
                         finishers=finishers_for(source.ledger.conn, ["events"]))
        built = time.perf_counter() - t0
        t1 = time.perf_counter()
        result = compact(source.ledger, "nightly")
        seconds = time.perf_counter() - t1
    table = reader_catalog(path).load_table("minikafka.nightly")
    per = {}
    for entry in table.inspect.files().select(["partition"]).to_pylist():
        key = repr(entry["partition"])
        per[key] = per.get(key, 0) + 1
    print(f"  {count} nights of {rows:,} rows ({built:.0f} s): {result.files_before} files, at most "
          f"{result.most_files_in_a_partition} per partition; compaction {seconds:.1f} s -> {max(per.values())} per "
          f"partition in {len(per)} partitions (target <= 2) {verdict(max(per.values()) <= 2)}")
    one = work / "nights" / "one.parquet"
    pq.write_table(table.scan().to_arrow(), one)
    sys.path.insert(0, str(ROOT / "tests" / "lake"))
    from readers import duckdb_connection

    con = duckdb_connection()
    scans = {}
    for name, sql in (("table", f"iceberg_scan('{table.metadata_location}')"), ("file", f"read_parquet('{one}')")):
        con.sql(f"SELECT sum(score), count(*) FROM {sql}").fetchall()  # warm
        t2 = time.perf_counter()
        for _ in range(5):
            con.sql(f"SELECT sum(score), count(*) FROM {sql}").fetchall()
        scans[name] = (time.perf_counter() - t2) / 5
    ratio = scans["table"] / scans["file"]
    print(f"  DuckDB scan of the compacted table {scans['table'] * 1000:.0f} ms vs one file {scans['file'] * 1000:.0f} ms:"
          f" {ratio:.2f}x (target <= 1.5x) {verdict(ratio <= 1.5)}")


def verdict(ok: bool) -> str:
    return "ok" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--history", type=int, default=10_000_000)
    parser.add_argument("--new", type=int, default=10_000)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--night-rows", type=int, default=2_000)
    args = parser.parse_args()
    work = scratch_dir("bench-lake-")
    staged = batches(args.rows)
    (work / "ledger").mkdir()
    (work / "lake").mkdir()
    print(f"{args.rows:,} rows; lake table partitioned by day(published), 10 days")
    base = commit(work / "ledger" / "l.sqlite", staged, lake=False)
    base_rate = args.rows / base
    print(f"  commit into a ledger topic:                 {base:6.2f} s  {base_rate:12,.0f} rows/s")
    lake = commit(work / "lake" / "l.sqlite", staged, lake=True)
    rate = args.rows / lake
    ratio = rate / base_rate
    print(f"  commit into a topic + its Iceberg table:    {lake:6.2f} s  {rate:12,.0f} rows/s  "
          f"(target >= {TARGET_RATE:,}) {verdict(rate >= TARGET_RATE)}")
    print(f"  ratio Iceberg/ledger:                       {ratio:6.2f}x (target >= {TARGET_RATIO}x) "
          f"{verdict(ratio >= TARGET_RATIO)}")
    table = reader_catalog(work / "lake" / "l.sqlite").load_table("minikafka.scored")
    files = int(table.metadata.current_snapshot().summary["total-data-files"])
    sys.path.insert(0, str(ROOT / "tests" / "lake"))
    from readers import duckdb_connection

    t0 = time.perf_counter()
    con = duckdb_connection()  # kept: a relation does not keep its connection open
    count = con.sql(f"SELECT count(*) FROM iceberg_scan('{table.metadata_location}')").fetchone()[0]
    print(f"  DuckDB count(*) of the table:               {time.perf_counter() - t0:6.2f} s  {count:,} rows in "
          f"{files} data files {verdict(count == args.rows)}")
    export(work, args.history, args.new)
    nights(work, args.nights, args.night_rows)


if __name__ == "__main__":
    sys.exit(exit_code(main))

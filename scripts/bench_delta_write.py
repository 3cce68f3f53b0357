"""Benchmark a Delta target's write: minikafka's (data files by pyarrow, then one Delta commit of
their add actions, so a crash between the two is a fault point of its own) against delta-rs's
``write_deltalake`` (files and commit in one call, what the target used before).

``--rows`` rows of a stage's shape (``_id``, ``n``, ``text`` mostly distinct, ``bucket`` 3
values, ``at`` a UTC timestamp), each way ``--repeat`` times into a new table, unpartitioned and
partitioned by ``bucket``, both with the same app transaction; the best time of each counts.
Target: minikafka's write is not slower than ``write_deltalake`` (ratio <= 1.1, the noise of a
shared machine). Exit status 1 when a target is missed.

Usage: python scripts/bench_delta_write.py [--rows 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench_common import exit_code, scratch_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rows(count: int):
    import pyarrow as pa

    start = datetime(2026, 1, 1, tzinfo=UTC)
    schema = pa.schema([pa.field("_id", pa.int64(), nullable=False), pa.field("n", pa.int64(), nullable=False),
                        pa.field("text", pa.string(), nullable=False), pa.field("bucket", pa.int64(), nullable=False),
                        pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False)])
    return pa.table({"_id": range(1, count + 1), "n": range(count), "text": [f"item {i}" for i in range(count)],
                     "bucket": [i % 3 for i in range(count)],
                     "at": [start + timedelta(seconds=i) for i in range(count)]}, schema=schema)


def write_once(how: str, location: str, table, partition_by: tuple[str, ...]) -> float:
    import deltalake
    from deltalake.transaction import create_table_with_add_actions

    from minikafka.ledger.lake.delta import write_data_files

    commit = deltalake.CommitProperties(app_transactions=[deltalake.Transaction("bench", table.num_rows)])
    t0 = time.perf_counter()
    if how == "write_deltalake":
        deltalake.write_deltalake(location, table, partition_by=list(partition_by) or None, commit_properties=commit)
    else:
        actions = write_data_files(location, table, partition_by)
        create_table_with_add_actions(location, deltalake.Schema.from_arrow(table.schema), actions, mode="error",
                                      partition_by=list(partition_by) or None, commit_properties=commit)
    seconds = time.perf_counter() - t0
    assert deltalake.DeltaTable(location).to_pyarrow_table(columns=["_id"]).num_rows == table.num_rows
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    work = scratch_dir("bench-delta-")
    table = rows(args.rows)
    for partition_by in ((), ("bucket",)):
        best = {}
        for i in range(args.repeat):
            for how in ("write_deltalake", "minikafka"):
                seconds = write_once(how, str(work / f"{how}-{'-'.join(partition_by)}-{i}"), table, partition_by)
                best[how] = min(best.get(how, seconds), seconds)
        ratio = best["minikafka"] / best["write_deltalake"]
        print(f"{args.rows:,} rows, partition_by {list(partition_by)}: write_deltalake {best['write_deltalake']:.3f} s, "
              f"minikafka {best['minikafka']:.3f} s, ratio {ratio:.2f} (target <= 1.1) "
              + ("ok" if ratio <= 1.1 else "FAIL"))


if __name__ == "__main__":
    sys.exit(exit_code(main))

"""Benchmark keyed tables (issue 41): a merge of changed keys into a large keyed table.

1. Build a keyed table of ``--rows`` keys (key ``(station, day)``, ``n`` summed, ``mean``
   replaced), in transactions of ``--chunk`` rows through the ledger's merge
   (``ledger.topics.keyed.merge_rows_in_current_transaction``; not timed).
2. Merge ``--changed`` rows, each changing a random existing key (Arrow batches of storage
   values, as a stage's commit hands them), in one transaction with its COMMIT.
   Target: >= 100,000 rows/s.
3. Append the same rows into the same table as a stage appends outputs
   (``TopicTable.insert_arrow_in_current_transaction``), in one transaction with its COMMIT.
   Target: the merge >= 0.5x the append's rate.

The scratch directory is removed at exit; exit status 1 when a target is missed. Heavy at
10M rows (a few GB of disk, minutes to build): run it under the machine's heavy lock.
Usage: python scripts/bench_keyed.py [--rows 10000000] [--changed 100000] [--chunk 1000000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import date, timedelta
from pathlib import Path

from bench_common import exit_code, scratch_dir
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minikafka import Source  # noqa: E402
from minikafka.ledger.topics import TopicTable, keyed  # noqa: E402
from minikafka.util.clock import utc_now  # noqa: E402

DAYS = 1000
EPOCH = date(2000, 1, 1)


class Daily(BaseModel):
    station: str
    day: date
    n: int
    mean: float


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def batch_of(keys: list[int], seed: int):
    """An Arrow batch of storage values for the keys numbered ``keys``."""
    import pyarrow as pa

    rnd = random.Random(seed)
    return pa.record_batch({
        "station": pa.array([f"station-{k // DAYS:07d}" for k in keys], pa.string()),
        "day": pa.array([(EPOCH + timedelta(days=k % DAYS)).isoformat() for k in keys], pa.string()),
        "n": pa.array([rnd.randrange(1, 100) for _ in keys], pa.int64()),
        "mean": pa.array([rnd.random() for _ in keys], pa.float64()),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="keys in the table before the merge")
    parser.add_argument("--changed", type=int, default=100_000, help="keys changed by the timed merge")
    parser.add_argument("--chunk", type=int, default=1_000_000, help="rows per transaction while building")
    args = parser.parse_args()
    tmp = scratch_dir("bench-keyed-")
    path = tmp / "ledger.sqlite"
    with Source(path) as src:
        table = src.table("daily", Daily, key=("station", "day"), merge={"n": "sum"})
        layout, ledger = table.layout, src.ledger
        t0 = time.perf_counter()
        for start in range(0, args.rows, args.chunk):
            ids = list(range(start, min(args.rows, start + args.chunk)))
            with ledger.atomic() as conn:
                keyed.merge_rows_in_current_transaction(conn, layout, [batch_of(ids, start)], utc_now())
            print(f"  built {start + len(ids):,} keys ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        print(f"build: {args.rows:,} keys in {time.perf_counter() - t0:.1f} s")
        changed = random.Random(7).sample(range(args.rows), min(args.changed, args.rows))
        batch = batch_of(changed, 1)

        t1 = time.perf_counter()
        with ledger.atomic() as conn:
            got = keyed.merge_rows_in_current_transaction(conn, layout, [batch], utc_now(), "bench-merge")
            t_commit = time.perf_counter()
        got.seconds["commit"] = round(time.perf_counter() - t_commit, 4)
        merge_s = time.perf_counter() - t1
        assert got.updated == len(changed), got
        merge_rate = len(changed) / merge_s

        t2 = time.perf_counter()
        with ledger.atomic() as conn:
            TopicTable(conn, layout).insert_arrow_in_current_transaction([batch], utc_now(), "bench-append")
        append_s = time.perf_counter() - t2
        append_rate = len(changed) / append_s

    print("  merge steps (s): " + ", ".join(f"{k} {v:.2f}" for k, v in got.seconds.items()))
    print(f"merge of {len(changed):,} changed keys into {args.rows:,}: {merge_s:.2f} s, {merge_rate:,.0f} rows/s "
          f"(target >= 100,000) {verdict(merge_rate >= 100_000)}")
    print(f"append of the same rows into the same table: {append_s:.2f} s, {append_rate:,.0f} rows/s; "
          f"merge/append {merge_rate / append_rate:.2f}x (target >= 0.5x) {verdict(merge_rate >= 0.5 * append_rate)}")


if __name__ == "__main__":
    sys.exit(exit_code(main))

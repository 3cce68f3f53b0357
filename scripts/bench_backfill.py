"""Benchmark backfill (issue 6): a 1,000,000-row gzip JSONL dump into an empty topic with a
dedup key, end to end (JVM start-up reported separately), then the same backfill re-run.

The re-run is measured twice: the same file (recognised by its content hash and skipped)
and the same rows in a re-compressed copy (a new file: every row goes through Spark and
the unique index finds it a duplicate). Nothing may be written by either.
Usage: python scripts/bench_backfill.py [--items 1000000]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import exit_code

from minikafka import Source

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--dump", help="reuse a dump made by generate_demo_data.py")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mk-bench-bf-"))
    dump = tmp / "dump.jsonl.gz"
    if args.dump:
        shutil.copy(args.dump, dump)
    else:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_demo_data.py"), "--items", str(args.items),
                        str(dump)], check=True, capture_output=True)
    copy = tmp / "copy.jsonl.gz"
    with gzip.open(dump, "rb") as src, gzip.open(copy, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst)

    from minikafka.spark import build_session
    from minikafka.spark.backfill import backfill
    from schemas.homelab import RssItem

    t0 = time.perf_counter()
    spark = build_session("bench-backfill", "local[2]")
    print(f"JVM + SparkSession start-up  {time.perf_counter() - t0:7.1f} s (separate)")
    with Source(str(tmp / "ledger.sqlite")) as src:
        topic = src.topic("rss.items", RssItem, dedup=("url",))
        t0 = time.perf_counter()
        first = backfill(spark, src, "rss.items", [str(dump)], model=RssItem, progress=None)
        t_first = time.perf_counter() - t0
        r = first.run
        print(f"first backfill             {t_first:7.1f} s  {first.rows_read / t_first:10,.0f} rows/s  "
              f"({first.rows_read:,} lines: {r.rows_out:,} loaded, {r.rows_duplicate:,} duplicates, "
              f"{r.rows_quarantined:,} quarantined; Spark read+validate+stage {r.details.get('spark_seconds')} s, "
              f"SQLite commit {r.details.get('commit_seconds')} s)  target >= 100,000 rows/s  "
              f"{'PASS' if first.rows_read / t_first >= 100_000 else 'FAIL'}")
        count = topic.count()
        t0 = time.perf_counter()
        backfill(spark, src, "rss.items", [str(dump)], model=RssItem, progress=None)
        t_same = time.perf_counter() - t0
        print(f"re-run, same file          {t_same:7.1f} s  ({t_first / t_same:,.0f}x faster; skipped by content hash)  "
              f"target < 2 s  {'PASS' if t_same < 2 else 'FAIL'}")
        t0 = time.perf_counter()
        again = backfill(spark, src, "rss.items", [str(copy)], model=RssItem, progress=None)
        t_copy = time.perf_counter() - t0
        print(f"re-run, re-compressed copy {t_copy:7.1f} s  ({t_first / t_copy:.1f}x faster; "
              f"{again.run.rows_duplicate:,} duplicates, {again.run.rows_out} written)  target >= 2x  "
              f"{'PASS' if t_first / t_copy >= 2 else 'FAIL'}")
        assert topic.count() == count and again.run.rows_out == 0


if __name__ == "__main__":
    sys.exit(exit_code(main))

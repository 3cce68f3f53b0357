"""Benchmark a 1,000,000-row stage on a local master: JDBC reads vs the staging (exchange) path.

Same data, same stage (select + arithmetic, dedup on a string key, empty target), run
once through each path after a warm-up. Prints each path's rows/s (JVM start-up
excluded) with its Spark, export and commit seconds, which path is faster, and the
commit's own rate. Targets: the stage >= 250,000 rows/s (issue 15) and the commit
step >= 250,000 rows/s.
Usage: python scripts/bench_staging.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench_common import exit_code
from bench_spark import fill, make_topics, stage

from minikafka import Source

TARGET = 250_000


def timed(spark, path: str, staging: str | None):
    from minikafka.spark import run_stage

    with Source(path) as src:
        make_topics(src)
        t0 = time.perf_counter()
        result = run_stage(spark, src, stage(), staging=staging)
        return time.perf_counter() - t0, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    from minikafka.spark import build_session

    t0 = time.perf_counter()
    spark = build_session(master="local[2]")
    print(f"JVM + SparkSession start-up {time.perf_counter() - t0:8.2f} s (excluded below)")
    tmp = Path(tempfile.mkdtemp(prefix="mk-bench-staging-"))
    shared = tmp / "shared"
    shared.mkdir()
    rates = {}
    for label, staging in (("warm-up", None), ("jdbc", None), ("staging", f"file://{shared}")):
        path = str(tmp / f"{label}.sqlite")
        with Source(path) as src:
            make_topics(src)
            fill(src, "items", 1, 2000 if label == "warm-up" else args.rows, "new")
        seconds, result = timed(spark, path, staging)
        if label == "warm-up":
            continue
        d = result.details
        rate = args.rows / seconds
        rates[label] = rate
        commit_rate = args.rows / d["commit_seconds"]
        print(f"stage, {label:8} path {seconds:8.2f} s {rate:10,.0f} rows/s  (spark {d['spark_seconds']:.2f} s incl. "
              f"export {d.get('export_seconds', 0):.2f} s, commit {d['commit_seconds']:.2f} s)  target >= {TARGET:,}  "
              f"{'PASS' if rate >= TARGET else 'FAIL'}")
        print(f"commit, {label:8} path {d['commit_seconds']:7.2f} s {commit_rate:10,.0f} rows/s  target >= {TARGET:,}  "
              f"{'PASS' if commit_rate >= TARGET else 'FAIL'}")
    faster = max(rates, key=rates.get)
    print(f"faster at {args.rows:,} rows on local[2]: {faster} ({max(rates.values()) / min(rates.values()):.2f}x)")
    spark.stop()


if __name__ == "__main__":
    sys.exit(exit_code(main))

"""Benchmark a 1,000,000-row stage on a local master: JDBC reads vs the staging (exchange) path.

Same data, same stage (select + arithmetic, dedup on a string key, empty target), after a
small warm-up. By default the commit reads Spark's output while the write job still runs
(``spark/stages/follow.py``); the script also runs the stage with the commit after the write
(the simpler path) and prints the ratio. Runs, in this order in one JVM:

1. JDBC path, the first 1,000,000-row stage of this JVM (its code not yet compiled by the
   JIT, as in a nightly ``spark-submit``): target >= 250,000 rows/s end to end;
2. JDBC path, commit after the write: the commit step alone, target >= 250,000 rows/s;
3. JDBC path again (compiled): the ratio to 2;
4. the staging (exchange) path, as a cluster runs it: target >= 250,000 rows/s;
5. JDBC path with keys in random order (URLs with a hash in the path, as real ones arrive;
   1-4 use numbered URLs, which reach the target's unique index nearly in order):
   target >= 250,000 rows/s end to end.

JVM start-up is excluded and printed. Exit status 1 when a target is missed.
Usage: python scripts/bench_staging.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import sys
import time

from bench_common import exit_code, scratch_dir
from bench_spark import fill, make_topics, stage

from minikafka import Source

TARGET = 250_000


def timed(spark, path: str, staging: str | None, follow: bool):
    import minikafka.spark.stages.stage as stage_module
    from minikafka.spark import run_stage

    stage_module.FOLLOW_WRITE = follow
    with Source(path) as src:
        make_topics(src)
        t0 = time.perf_counter()
        result = run_stage(spark, src, stage(), staging=staging)
        return time.perf_counter() - t0, result


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    from minikafka.spark import build_session

    t0 = time.perf_counter()
    spark = build_session(master="local[2]")
    print(f"JVM + SparkSession start-up {time.perf_counter() - t0:8.2f} s (excluded below)")
    tmp = scratch_dir("mk-bench-staging-")
    shared = tmp / "shared"
    shared.mkdir()
    runs = (("warm-up", None, True), ("jdbc, first", None, True), ("jdbc, after", None, False),
            ("jdbc, again", None, True), ("staging", f"file://{shared}", True), ("jdbc, random keys", None, True))
    rates = {}
    for label, staging, follow in runs:
        path = str(tmp / f"{label.replace(', ', '-').replace(' ', '-')}.sqlite")
        with Source(path) as src:
            make_topics(src)
            fill(src, "items", 1, 2000 if label == "warm-up" else args.rows, "new",
                 keys="random" if "random" in label else "sorted")
        seconds, result = timed(spark, path, staging, follow)
        if label == "warm-up":
            continue
        d = result.details
        rate = args.rows / seconds
        rates[label] = rate
        how = "commit while Spark writes" if follow else "commit after the write"
        line = (f"stage, {label:17} {seconds:6.2f} s {rate:10,.0f} rows/s  ({how}: spark {d['spark_seconds']:.2f} s, "
                f"export {d.get('export_seconds', 0):.2f} s, commit {d['commit_seconds']:.2f} s)")
        if label in ("jdbc, first", "staging", "jdbc, random keys"):
            line += f"  target >= {TARGET:,}  {verdict(rate >= TARGET)}"
        print(line)
        if not follow:
            commit_rate = args.rows / d["commit_seconds"]
            print(f"commit step alone      {d['commit_seconds']:6.2f} s {commit_rate:10,.0f} rows/s  "
                  f"target >= {TARGET:,}  {verdict(commit_rate >= TARGET)}")
    print(f"commit while Spark writes vs after the write (JDBC, compiled): "
          f"{rates['jdbc, again'] / rates['jdbc, after']:.2f}x faster")
    print(f"JDBC vs staging path: {rates['jdbc, again'] / rates['staging']:.2f}x faster")
    print(f"keys in random order vs numbered keys (JDBC, compiled): {rates['jdbc, random keys'] / rates['jdbc, again']:.2f}x")
    spark.stop()


if __name__ == "__main__":
    sys.exit(exit_code(main))

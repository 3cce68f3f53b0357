"""Benchmark growth (issue 33): loads and commits with keys in random order, as history grows.

1. Backfill: N gzip JSONL dumps of the example's items, each with ``--rows / --dumps`` lines
   (``generate_demo_data.py --keys random``: URLs with a hash in the path, so the dedup key
   reaches the topic's unique index in random order), loaded one after another into one
   ``rss.items`` topic deduplicated on ``url``. Prints rows/s per dump beside the history
   it went into (JVM start-up excluded, as ``bench_backfill.py`` reports it).
   Targets: the first dump (empty topic) >= 100,000 rows/s (checked when dumps hold at
   least 1,000,000 lines: smaller ones measure Spark's fixed cost per job); the last dump
   >= 0.7x the first.
2. A stage's commit of ``--rows / 20`` rows with random keys (1,000,000 at 20M) into a
   target holding 0, ``--rows / 4`` and ``--rows`` rows (0, 5M, 20M). The stage commits
   after Spark's write, so the commit step is timed alone. Target: into the largest
   target >= 0.7x the rate into the empty one.
3. ``minikafka topics`` against ``minikafka status`` on the ledger of step 1 (two
   consumers: one halfway through the topic, one with rows acked out of order), best of
   three, wall time of the command. Target: topics <= status + 0.2 s.

Dumps are generated before each load (not timed) and removed after it; the scratch
directory is removed at exit. At ``--rows 20000000`` step 1 needs about 12 GB of disk.
Exit status 1 when a target is missed.
Usage: python scripts/bench_growth.py [--rows 400000] [--dumps 10] [--skip-backfill] [--skip-stage]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench_common import exit_code, scratch_dir
from bench_spark import fill, make_topics, stage

from minikafka import Source

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the example's models (schemas/), as the example pipeline imports them
MIN_ABSOLUTE = 1_000_000  # dumps at least this big are held to the absolute rate


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def disk_use(path: Path) -> str:
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return f"{total / 2**30:.2f} GiB"


def generate(dump: Path, items: int, start: int) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_demo_data.py"), "--items", str(items),
                    "--start", str(start), "--keys", "random", "--gzip-level", "1", str(dump)],
                   check=True, capture_output=True)


def backfills(spark, tmp: Path, rows: int, dumps: int) -> Path:
    from minikafka.spark.loading.backfill import backfill
    from schemas.homelab import RssItem

    per_dump = rows // dumps
    with Source(str(tmp / "warm.sqlite")) as src:  # the JVM's first job compiles code: not the load's cost
        src.topic("rss.items", RssItem, dedup=("url",))
        warm = tmp / "warm.jsonl.gz"
        generate(warm, 2000, 0)
        backfill(spark, src, "rss.items", [str(warm)], model=RssItem, progress=None)
    path = tmp / "growth.sqlite"
    rates = []
    history = 0
    print(f"backfill of {dumps} dumps of {per_dump:,} lines (keys in random order) into one topic:")
    with Source(str(path)) as src:
        src.topic("rss.items", RssItem, dedup=("url",))
        for k in range(dumps):
            dump = tmp / f"dump-{k:03d}.jsonl.gz"
            generate(dump, per_dump, k * per_dump)
            t0 = time.perf_counter()
            result = backfill(spark, src, "rss.items", [str(dump)], model=RssItem, progress=None)
            seconds = time.perf_counter() - t0
            dump.unlink()
            r = result.run
            rate = r.rows_in / seconds
            rates.append(rate)
            print(f"  dump {k + 1:3d}  history {history:12,} rows  {seconds:7.1f} s  {rate:10,.0f} rows/s  "
                  f"(SQLite commit {r.details.get('commit_seconds')} s, {r.rows_out:,} loaded)", flush=True)
            history += r.rows_out
    first, last = rates[0], rates[-1]
    if per_dump >= MIN_ABSOLUTE:
        print(f"backfill, random keys, empty topic      {first:10,.0f} rows/s  target >= 100,000  "
              f"{verdict(first >= 100_000)}")
    else:
        print(f"backfill, random keys, empty topic      {first:10,.0f} rows/s  (target >= 100,000 checked "
              f"for dumps of {MIN_ABSOLUTE:,}+ lines)")
    print(f"backfill into {history - r.rows_out:,} rows of history  {last:10,.0f} rows/s  "
          f"{last / first:.2f}x the empty topic's  target >= 0.7x  {verdict(last >= 0.7 * first)}")
    print(f"ledger after the backfills: {disk_use(tmp)} on disk")
    return path


def stage_commits(spark, tmp: Path, rows: int) -> None:
    import minikafka.spark.stages.stage as stage_module
    from minikafka.spark import run_stage

    stage_module.FOLLOW_WRITE = False  # the commit step timed alone
    batch = max(rows // 20, 1)
    sizes = [0, rows // 4, rows]
    path = str(tmp / "commits.sqlite")
    rates = []
    print(f"a stage's commit of {batch:,} rows (keys in random order) into a growing target:")
    held = 0
    with Source(path) as src:
        make_topics(src)
    for k, size in enumerate(sizes):
        with Source(path) as src:
            make_topics(src)
            if size > held:  # history of the target: keys 10^9 + i, never an item's
                fill(src, "scored", 10**9 + held + 1, size - held, "new", keys="random", key_order=True)
                held = size
            fill(src, "items", k * batch + 1, batch, "new", keys="random", key_order=True)
            src.ledger.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            os.sync()  # the set-up's writes on disk before the commit's fsync, which would wait for them
            result = run_stage(spark, src, stage())
            held += result.rows_out
        seconds = result.details["commit_seconds"]
        rate = batch / seconds
        rates.append(rate)
        print(f"  target holding {size:12,} rows  commit {seconds:6.2f} s  {rate:10,.0f} rows/s  "
              f"({result.rows_out:,} written)", flush=True)
    print(f"commit into {sizes[-1]:,} rows  {rates[-1] / rates[0]:.2f}x the empty target's  target >= 0.7x  "
          f"{verdict(rates[-1] >= 0.7 * rates[0])}")
    os.unlink(path)


def cli_seconds(args: list[str]) -> float:
    exe = shutil.which("minikafka", path=str(Path(sys.executable).parent)) or "minikafka"
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([exe, *args], check=True, capture_output=True)
        best = min(best, time.perf_counter() - t0)
    return best


def counts(path: Path) -> None:
    from schemas.homelab import RssItem

    with Source(str(path)) as src:
        topic = src.topic("rss.items", RssItem, dedup=("url",))
        total = topic.high_watermark()
        topic.consumer("scattered")
        src.group("halfway").commit("rss.items", 0, total // 2)
        for row_id in range(total // 3, total, max(total // 1000, 1)):
            topic.set_handled(row_id, consumer="scattered")
    t_topics = cli_seconds(["topics", "--source", str(path)])
    t_status = cli_seconds(["status", "--source", str(path)])
    print(f"minikafka topics {t_topics:6.2f} s, status {t_status:6.2f} s on {total:,} rows (best of 3)  "
          f"target topics <= status + 0.2 s  {verdict(t_topics <= t_status + 0.2)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000, help="rows of history at the end (20000000 for the issue)")
    parser.add_argument("--dumps", type=int, default=10, help="dumps the backfill rows are cut into")
    parser.add_argument("--skip-backfill", action="store_true", help="skip steps 1 and 3")
    parser.add_argument("--skip-stage", action="store_true", help="skip step 2")
    args = parser.parse_args()
    from minikafka.spark import build_session

    started = time.perf_counter()
    t0 = time.perf_counter()
    spark = build_session("bench-growth", "local[2]")
    print(f"JVM + SparkSession start-up  {time.perf_counter() - t0:7.1f} s (excluded below)")
    tmp = scratch_dir("mk-bench-growth-")
    try:
        if not args.skip_backfill:
            ledger = backfills(spark, tmp, args.rows, args.dumps)
            counts(ledger)
            ledger.unlink()
        if not args.skip_stage:
            stage_commits(spark, tmp, args.rows)
    finally:
        spark.stop()
    print(f"whole benchmark {time.perf_counter() - started:,.0f} s")


if __name__ == "__main__":
    sys.exit(exit_code(main))

"""Benchmark the Spark engine (issue 3 targets), in one run.

1. A stage over N new rows (1,000,000: select + arithmetic, dedup on a string key, empty
   target): rows/s excluding JVM start-up (target >= 150,000) and the ratio against the
   row-level Python pipeline on the same data (target >= 20x).
2. The same stage with 10,000 new rows on a 5,000,000-row history in source and target,
   against 10,000 new rows on empty history (target: within 2x).
3. Driver peak memory (Python process and driver JVM, VmHWM) for a stage writing
   5,000,000 rows with spark.driver.memory=1g (run in a child process).

History is generated with SQLite's recursive CTE (set-up, not measured).
Usage: python scripts/bench_spark.py [--rows 1000000] [--history 5000000] [--skip-memory]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench_common import exit_code, scratch_dir
from pydantic import BaseModel

from minikafka import Source
from minikafka.util.clock import utc_now


class Item(BaseModel):
    url: str
    title: str
    n: int


class Scored(BaseModel):
    url: str
    score: int


def make_topics(src: Source):
    return src.topic("items", Item, dedup=("url",)), src.topic("scored", Scored, dedup=("url",))


# item i's URL: numbered (keys reach the unique index nearly in order), or with a
# permutation of i in its path (keys in random order, as real URLs arrive; i * a mod a prime
# is one-to-one for i below the prime)
URL_SQL = {"sorted": "'https://example.com/' || i",
           "random": "'https://example.com/posts/' || printf('%08x', (i * 2654435761) % 4294967291) || '/item'"}


def fill(src: Source, table: str, start: int, count: int, status: str, keys: str = "sorted",
         key_order: bool = False) -> None:
    """Bulk rows straight in SQL (benchmark set-up only). ``key_order``: insert the rows in
    the order of their keys (a large history set up fast; ids then do not follow ``i``)."""
    from minikafka.ledger.topics import acks, counts

    conn = src.ledger.conn
    url = URL_SQL[keys]
    order = " ORDER BY 1" if key_order else ""
    with src.ledger.atomic():
        before = conn.execute(f'SELECT coalesce(max("_id"), 0) FROM {table}').fetchone()[0]
        if table == "items":
            conn.execute(
                "WITH RECURSIVE c(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM c WHERE i < ?) "
                "INSERT INTO items (url, title, n, _created_at) "
                f"SELECT {url}, 'title ' || i, i, ? FROM c{order}",
                (start, start + count - 1, utc_now()))
        else:
            conn.execute(
                "WITH RECURSIVE c(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM c WHERE i < ?) "
                "INSERT INTO scored (url, score, _created_at) "
                f"SELECT {url}, i, ? FROM c{order}",
                (start, start + count - 1, utc_now()))
        counts.note_appended_in_current_transaction(conn, table)  # row marks, as every ledger writer adds
        if status == "handled":  # history: handled for every consumer (a position, no per-row write)
            acks.mark_appended_handled_in_current_transaction(conn, table, before, utc_now())


def stage():
    from pyspark.sql import functions as F

    from minikafka.spark import Stage

    return Stage("score", ["items"], ["scored"],
                 transform=lambda df: df.select("_id", "url", (F.col("n") * 2 + 1).alias("score")))


def timed_stage(spark, path: str) -> tuple[float, object]:
    from minikafka.spark import run_stage

    with Source(path) as src:
        make_topics(src)
        t0 = time.perf_counter()
        result = run_stage(spark, src, stage())
        return time.perf_counter() - t0, result


def python_pipeline(path: str) -> float:
    with Source(path) as src:
        items, scored = make_topics(src)
        t0 = time.perf_counter()
        items.pipe(lambda i: Scored(url=i.url, score=i.n * 2 + 1)).to(scored).run()
        return time.perf_counter() - t0


def memory_child(path: str, rows: int) -> None:
    """Child mode: a 5M-row output stage with a 1g driver; prints peak memory as JSON."""
    from minikafka.spark import build_session, run_stage

    spark = build_session(master="local[2]", conf={"spark.driver.memory": "1g"})
    jvm = jvm_pid()
    with Source(path) as src:
        make_topics(src)
        result = run_stage(spark, src, stage())
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across exec
    py_peak = vm_hwm(os.getpid()) / 1024
    print(json.dumps({"rows_out": result.rows_out, "python_peak_mb": round(py_peak, 1),
                      "jvm_peak_mb": round(vm_hwm(jvm) / 1024, 1) if jvm else None,
                      "seconds": result.duration_s}))


def jvm_pid() -> int | None:
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().split()
                if stat[3] == me and "java" in (entry / "comm").read_text():
                    return int(entry.name)
            except OSError:
                continue
    return None


def vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--history", type=int, default=5_000_000)
    parser.add_argument("--new", type=int, default=10_000)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--only-memory", action="store_true")
    parser.add_argument("--memory-child", nargs=2, metavar=("PATH", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child[0], int(args.memory_child[1]))
        return

    from minikafka.spark import build_session

    if args.only_memory:
        memory_benchmark(args.history)
        return
    t0 = time.perf_counter()
    spark = build_session(master="local[2]")
    jvm_start = time.perf_counter() - t0
    print(f"JVM + SparkSession start-up        {jvm_start:8.2f} s (excluded below)")
    tmp = scratch_dir("mk-bench-")

    # 1. N new rows, empty target; then the Python pipeline on the same data
    big, py = str(tmp / "big.sqlite"), str(tmp / "py.sqlite")
    for path in (big, py):
        with Source(path) as src:
            make_topics(src)
            fill(src, "items", 1, args.rows, "new")
    # warm-up on a tiny ledger so JIT/class loading is not charged to the stage
    warm = str(tmp / "warm.sqlite")
    with Source(warm) as src:
        make_topics(src)
        fill(src, "items", 1, 1000, "new")
    timed_stage(spark, warm)
    seconds, result = timed_stage(spark, big)
    rate = args.rows / seconds
    d = result.details
    print(f"stage over {args.rows:,} new rows       {seconds:8.2f} s  {rate:10,.0f} rows/s  "
          f"(spark {d['spark_seconds']:.2f} s, commit {d['commit_seconds']:.2f} s)  target >= 150,000  "
          f"{'PASS' if rate >= 150_000 else 'FAIL'}")
    py_seconds = python_pipeline(py)
    ratio = py_seconds / seconds
    print(f"row-level Python pipeline, same     {py_seconds:8.2f} s  {args.rows / py_seconds:10,.0f} rows/s  "
          f"stage is {ratio:.1f}x faster  target >= 20x  {'PASS' if ratio >= 20 else 'FAIL'}")

    # 2. 10k new rows: empty history vs 5M history in source and target
    small, hist = str(tmp / "small.sqlite"), str(tmp / "hist.sqlite")
    with Source(small) as src:
        make_topics(src)
        fill(src, "items", 1, args.new, "new")
    with Source(hist) as src:
        make_topics(src)
        fill(src, "items", 1, args.history, "handled")
        fill(src, "scored", 1, args.history, "new")
        fill(src, "items", args.history + 1, args.new, "new")
    empty_s, _ = timed_stage(spark, small)
    hist_s, hist_result = timed_stage(spark, hist)
    assert hist_result.rows_out == args.new, hist_result
    print(f"{args.new:,} new rows, empty history      {empty_s:8.2f} s")
    print(f"{args.new:,} new rows, {args.history:,} history {hist_s:8.2f} s  ratio {hist_s / empty_s:.2f}  "
          f"target <= 2.0  {'PASS' if hist_s / empty_s <= 2 else 'FAIL'}")
    spark.stop()

    # 3. driver memory for a 5M-row output
    if not args.skip_memory:
        memory_benchmark(args.history)


def memory_benchmark(rows: int) -> None:
    tmp = scratch_dir("mk-bench-mem-")
    mem = str(tmp / "mem.sqlite")
    with Source(mem) as src:
        make_topics(src)
        fill(src, "items", 1, rows, "new")
    out = subprocess.run([sys.executable, __file__, "--memory-child", mem, str(rows)],
                         capture_output=True, text=True, check=True)
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{facts['rows_out']:,}-row output, driver.memory=1g: python peak {facts['python_peak_mb']} MB, "
          f"driver JVM peak {facts['jvm_peak_mb']} MB, stage {facts['seconds']:.1f} s")


if __name__ == "__main__":
    sys.exit(exit_code(main))

"""Benchmark windowed streams and watch mode (issue 14 targets).

1. Count-window throughput: a trivial function, size 1,000, over a 1,000,000-row stream
   (target: at least 100,000 rows/s).
2. Watch-mode latency: from an append of 100 rows committed to the stage's output
   committed, one warm Spark application (target: p50 under 2 s).
3. Memory of a ``window = { rows = 100000 }`` stage over a 2,000,000-row backlog with
   spark.driver.memory=1g: peak RSS (VmHWM) of the Python driver and of the driver JVM,
   beside the same stage over a 200,000-row backlog. Targets: the driver JVM under
   1,600 MB (its 1 GB heap cap plus about 0.5 GB of metaspace, code cache, threads and
   direct buffers: what a JVM bounded by -Xmx1g can reach at most, whatever the backlog)
   and the Python driver under 600 MB (pyspark plus one 50,000-row Arrow batch of the
   commit, a 3x margin). The 2M/200k ratios are printed for information, not as targets:
   a JVM grows its heap lazily towards -Xmx over more GC cycles, so its RSS creeps up
   with run time even when each chunk's working set is the same.

Prints each figure beside its target; exits 1 when one is missed. Run it alone
(``flock /tmp/minikafka-spark.lock python scripts/bench_streams.py`` on a shared box).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_common import scratch_dir  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from minikafka import Source  # noqa: E402
from minikafka.util.clock import utc_now  # noqa: E402

MISSES: list[str] = []


def check(label: str, value: float, target: float, unit: str, *, higher_is_better: bool) -> None:
    ok = value >= target if higher_is_better else value <= target
    sign = ">=" if higher_is_better else "<="
    print(f"{label:60} {value:>12,.2f} {unit:8} target {sign} {target:,} {'ok' if ok else 'MISSED'}", flush=True)
    if not ok:
        MISSES.append(label)


# -- 1. count-window throughput -------------------------------------------------------------
def count_windows(rows: int, size: int) -> None:
    tmp = scratch_dir("mk-bench-streams-")
    with Source(str(tmp / "streams.sqlite")) as source:
        source.stream("bench.events")
        with source.ledger.atomic() as conn:
            conn.execute(
                "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) "
                "INSERT INTO \"bench.events\" (data, _created_at) "
                "SELECT json_object('i', i, 'sensor', 'kitchen'), ? FROM c", (rows, utc_now()))
        seen = [0]

        def trivial(window):
            seen[0] += len(window.data)

        t0 = time.perf_counter()
        consumer = source.streaming("bench.events", trivial, size=size, until_idle=True)
        seconds = time.perf_counter() - t0
    assert seen[0] == rows and consumer.windows_committed == rows // size
    print(f"count windows: {rows:,} rows, size {size:,}: {consumer.windows_committed:,} windows in {seconds:.2f} s")
    check("count-window throughput (rows/s)", rows / seconds, 100_000, "rows/s", higher_is_better=True)


# -- 2. watch latency -----------------------------------------------------------------------
PIPELINE = """
[pipeline]
name = "bench-watch"
source = "{ledger}"
master = "local[2]"

[spark]
"spark.driver.memory" = "1g"
"spark.sql.shuffle.partitions" = "2"

[topics."rss.items"]
model = "schemas.homelab:RssItem"
dedup = ["url"]

[topics."rss.articles"]
model = "schemas.homelab:RssItem"
dedup = ["url"]

[[stages]]
name = "keep_articles"
job = "jobs.keep_articles"
inputs = ["rss.items"]
outputs = ["rss.articles"]
"""


def items(start: int, n: int) -> list[dict]:
    return [{"url": f"https://example.com/bench/{i}", "feed": "bench", "title": f"item {i}", "body": "text",
             "published": "2030-01-01T00:00:00Z"} for i in range(start, start + n)]


def watch_latency(samples: int, rows: int) -> None:
    from minikafka.pipelines import load_pipeline
    from minikafka.pipelines.opening import open_source
    from minikafka.pipelines.watch import Watch
    from minikafka.spark.session import build_session

    tmp = scratch_dir("mk-bench-watch-")
    conf = tmp / "watch.toml"
    conf.write_text(PIPELINE.format(ledger=tmp / "watch.sqlite"))
    defn = load_pipeline(conf)
    t0 = time.perf_counter()
    spark = build_session("minikafka:bench-watch", "local[2]", conf=defn.spark)
    print(f"watch: JVM + SparkSession start-up {time.perf_counter() - t0:.1f} s (once, not in the latency)")
    watch = Watch(defn, spark=spark, echo=lambda m: None)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    latencies = []
    with open_source(defn) as source:
        src, out = source.opened("rss.items"), source.opened("rss.articles")
        for k in range(samples + 1):  # the first one warms the stage's code paths up
            src.extend(items(k * rows, rows))
            committed = time.perf_counter()
            expected = (k + 1) * rows
            while out.count() < expected:
                time.sleep(0.005)
            if k:
                latencies.append(time.perf_counter() - committed)
    watch.stop()
    thread.join(60)
    spark.stop()
    p50 = statistics.median(latencies)
    p90 = statistics.quantiles(latencies, n=10)[-1]
    print(f"watch latency over {samples} samples of {rows} rows: p50 {p50:.2f} s, p90 {p90:.2f} s, "
          f"max {max(latencies):.2f} s")
    check("watch latency append -> output committed, p50 (s)", p50, 2.0, "s", higher_is_better=False)


# -- 3. memory of a chunked stage ----------------------------------------------------------
class Item(BaseModel):
    url: str
    title: str
    n: int


class Scored(BaseModel):
    url: str
    score: int


def memory_child(path: str, window: int) -> None:
    from pyspark.sql import functions as F

    from minikafka.spark import Stage, build_session
    from minikafka.spark.stages.chunks import run_stage_in_chunks

    spark = build_session(master="local[2]", conf={"spark.driver.memory": "1g"})
    jvm = jvm_pid()
    stage = Stage("score", ["items"], ["scored"],
                  transform=lambda df: df.select("_id", "url", (F.col("n") * 2 + 1).alias("score")))
    t0 = time.perf_counter()
    with Source(path) as src:
        src.topic("items", Item, dedup=("url",)), src.topic("scored", Scored, dedup=("url",))
        runs = run_stage_in_chunks(spark, src, stage, window)
    print(json.dumps({"chunks": len(runs), "rows_out": sum(r.rows_out for r in runs),
                      "python_peak_mb": round(vm_hwm(os.getpid()) / 1024, 1),
                      "jvm_peak_mb": round(vm_hwm(jvm) / 1024, 1) if jvm else None,
                      "seconds": round(time.perf_counter() - t0, 1)}))


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


def chunked_peak(rows: int, window: int) -> dict:
    tmp = scratch_dir("mk-bench-chunks-")
    path = str(tmp / "chunks.sqlite")
    with Source(path) as src:
        src.topic("items", Item, dedup=("url",)), src.topic("scored", Scored, dedup=("url",))
        with src.ledger.atomic() as conn:
            conn.execute(
                "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) "
                "INSERT INTO items (url, title, n, _created_at) "
                "SELECT 'https://example.com/' || i, 'title ' || i, i, ? FROM c", (rows, utc_now()))
    out = subprocess.run([sys.executable, __file__, "--memory-child", path, str(window)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"memory child failed:\n{out.stderr[-3000:]}")
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["rows_out"] == rows, facts
    print(f"window = {{ rows = {window:,} }} over {rows:,} rows: {facts['chunks']} chunks in {facts['seconds']} s, "
          f"python peak {facts['python_peak_mb']} MB, driver JVM peak {facts['jvm_peak_mb']} MB")
    return facts


def memory(rows: int, small: int, window: int) -> None:
    base = chunked_peak(small, window)
    big = chunked_peak(rows, window)
    check(f"driver JVM peak, {rows:,}-row backlog (MB)", big["jvm_peak_mb"], 1600, "MB", higher_is_better=False)
    check(f"Python driver peak, {rows:,}-row backlog (MB)", big["python_peak_mb"], 600, "MB", higher_is_better=False)
    print(f"for information: peaks over {rows:,} rows / over {small:,} rows: "
          f"JVM {big['jvm_peak_mb'] / base['jvm_peak_mb']:.2f}x, "
          f"Python {big['python_peak_mb'] / base['python_peak_mb']:.2f}x (10x the backlog)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--backlog", type=int, default=2_000_000)
    parser.add_argument("--window", type=int, default=100_000)
    parser.add_argument("--skip", action="append", default=[], choices=["count", "watch", "memory"])
    parser.add_argument("--memory-child", nargs=2, metavar=("LEDGER", "WINDOW"))
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child[0], int(args.memory_child[1]))
        return
    if "count" not in args.skip:
        count_windows(args.rows, args.size)
    if "watch" not in args.skip:
        watch_latency(args.samples, 100)
    if "memory" not in args.skip:
        memory(args.backlog, args.backlog // 10, args.window)
    if MISSES:
        print(f"MISSED: {', '.join(MISSES)}")
        sys.exit(1)
    print("all targets met")


if __name__ == "__main__":
    main()

"""Benchmark the engines on the example pipeline: a warm engine (Spark Connect) vs one spark-submit per stage.

Every figure comes from the real `minikafka` command (wall time from the CLI), on identical
copies of one ledger (the demo feed's items, ingested once), in this order:

1. the bare spark-submit floor: a script that builds a SparkSession and counts one row;
2. the example DAG, one spark-submit per stage (``--engine submit``), on copy A;
3. the same DAG from cold, ``run`` starting its own engine (its start included), on copy B;
4. the same DAG on that engine, now warm, on copy C: >= 6x faster than 2; from 3: >= 3x
   faster than 2; for reference the DAG ``--in-process`` on copy D; the four ledgers identical
   afterwards (rows, status, lineage, acks, quarantine);
5. one stage (keep_articles) over 10,000 new rows on the warm engine: <= 1.5 s;
6. the same stage over the same rows under spark-submit, on copy A: <= floor + 1.5 s;
7. the DAG with nothing new: <= 1 s;
8. a second pipeline file (copy E, its own ledger) run with the default engine: it uses the
   running engine (no second JVM) and takes about the warm DAG's time; then the memory the idle
   engine's JVM holds (RSS), one JVM for both pipeline files;
9. bench_staging's 1,000,000-row stage on the warm engine: >= 250,000 rows/s, with keys numbered
   in order and with keys in random order (URLs with a hash in the path, as real ones arrive).

``--stage-only`` runs 3 (to start an engine) and 9 only.

Engines are recorded in a scratch engine directory ($MINIKAFKA_ENGINE_DIR): the cold run never
finds an engine of yours.

The engine is stopped at the end (and if the script is interrupted): no JVM outlives it.
Exit status 1 when a target is missed.
Usage: python scripts/bench_engine.py [--items 5000] [--rows 1000000] [--stage-only]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from bench_common import exit_code, scratch_dir, timed_minikafka

ROOT = Path(__file__).resolve().parents[1]
TOPICS = ("rss.items", "rss.youtube", "rss.articles", "rss.summaries", "rss.scored")
FLOOR_JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print(spark.range(1).count())
"""


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def mk(*args, check: bool = True) -> float:
    """Run `minikafka ARGS` from the checkout; return its wall time in seconds."""
    return timed_minikafka(ROOT, {**os.environ, "PYTHONPATH": str(ROOT)}, *args, check=check)


def pipeline_copy(home: Path, ledger: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(ledger, home / "homelab.sqlite")
    text = (ROOT / "conf" / "homelab.toml").read_text()
    text = text.replace('source = "../data/homelab.sqlite"', f'source = "{home / "homelab.sqlite"}"')
    text = text.replace('"quality/', f'"{ROOT / "conf" / "quality"}/')
    path = home / "homelab.toml"
    path.write_text(text)
    return path


def snapshot(path: Path) -> dict:
    """Every topic's rows with status and lineage (no times or run ids), the quarantine, the acks."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        for topic in TOPICS:
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{topic}:status")')
                    if not r[1].startswith("_") or r[1] in ("_status", "_parent_id", "_id")]
            out[topic] = sorted(conn.execute(f'SELECT {", ".join(repr(c) for c in cols)} FROM "{topic}:status"')
                                .fetchall(), key=repr)
        out["quarantine"] = sorted(conn.execute("SELECT topic, row_id, reason FROM _minikafka_quarantine").fetchall(),
                                   key=repr)
        return out
    finally:
        conn.close()


def floor_seconds(tmp: Path) -> float:
    import pyspark

    script = tmp / "floor.py"
    script.write_text(FLOOR_JOB)
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    t0 = time.perf_counter()
    subprocess.run([str(submit), "--master", "local[2]", "--conf", "spark.ui.showConsoleProgress=false", str(script)],
                   check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5000, help="demo feed items (default 5000: 4,843 stored)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the bench_staging stage (0: skip)")
    parser.add_argument("--stage-only", action="store_true",
                        help="only start an engine (a cold run) and time the bench_staging stage on it")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    tmp = scratch_dir("mk-bench-engine-")
    os.environ["MINIKAFKA_ENGINE_DIR"] = str(tmp / "engines")  # this bench's engines only, never the user's
    dump = tmp / "feed.jsonl"
    more = tmp / "more.jsonl"
    gen = [sys.executable, str(ROOT / "scripts" / "generate_demo_data.py")]
    subprocess.run([*gen, "--items", str(args.items), str(dump)], check=True, capture_output=True)
    subprocess.run([*gen, "--items", "10000", "--start", "1000000", str(more)], check=True, capture_output=True)
    seed_home = tmp / "seed"
    seed_home.mkdir()
    seed = seed_home / "homelab.toml"
    seed.write_text((ROOT / "conf" / "homelab.toml").read_text()
                    .replace('source = "../data/homelab.sqlite"', f'source = "{seed_home / "homelab.sqlite"}"')
                    .replace('"quality/', f'"{ROOT / "conf" / "quality"}/'))
    mk("ingest", seed, "rss.items", dump)
    ledger = seed_home / "homelab.sqlite"
    a, b, c, d, e = (pipeline_copy(tmp / name, ledger) for name in ("a", "b", "c", "d", "e"))

    from minikafka.pipelines import load_pipeline
    from minikafka.pipelines.launch.engine import find_engine, stop_engine

    engine_of_b = load_pipeline(b, suites=False)
    atexit.register(stop_engine, engine_of_b)

    if args.stage_only:
        mk("run", b, "--engine", "auto", "--idle-timeout", "600")
        state = find_engine(engine_of_b)
        if state is None:
            raise SystemExit("the engine that run started is not running")
        for line in staging_on_engine(state.url, tmp, args.rows or 1_000_000):
            print(line)
        stop_engine(engine_of_b)
        return
    floor = floor_seconds(tmp)
    print(f"bare spark-submit floor (SparkSession, count one row)   {floor:7.2f} s")
    submit_dag = mk("run", a, "--engine", "submit")
    print(f"example DAG, one spark-submit per stage                  {submit_dag:7.2f} s")
    cold = mk("run", b, "--engine", "auto", "--idle-timeout", "600")
    print(f"example DAG, cold: run starts its own engine             {cold:7.2f} s  {submit_dag / cold:5.1f}x  "
          f"target >= 3.0x  {verdict(submit_dag / cold >= 3)}")
    state = find_engine(engine_of_b)
    if state is None:
        raise SystemExit("the engine that run started is not running")
    warm = mk("run", c, "--remote", state.url)
    print(f"example DAG, warm engine                                 {warm:7.2f} s  {submit_dag / warm:5.1f}x  "
          f"target >= 6.0x  {verdict(submit_dag / warm >= 6)}")
    in_process = mk("run", d, "--in-process")
    print(f"example DAG, --in-process (one application, for reference) {in_process:5.2f} s  "
          f"{submit_dag / in_process:5.1f}x")
    same = snapshot(a.parent / "homelab.sqlite") == snapshot(b.parent / "homelab.sqlite") == \
        snapshot(c.parent / "homelab.sqlite") == snapshot(d.parent / "homelab.sqlite")
    print(f"ledgers identical after the four runs (rows, status, lineage, acks, quarantine): {same}  {verdict(same)}")

    for copy in (a, c):
        mk("ingest", copy, "rss.items", more)
    stage_warm = mk("run", c, "--remote", state.url, "--stage", "keep_articles")
    print(f"stage over 10,000 new rows, warm engine, CLI wall        {stage_warm:7.2f} s  "
          f"target <= 1.50 s  {verdict(stage_warm <= 1.5)}")
    stage_submit = mk("run", a, "--engine", "submit", "--stage", "keep_articles")
    print(f"same stage under spark-submit                            {stage_submit:7.2f} s  "
          f"floor + {stage_submit - floor:.2f} s  target <= floor + 1.50 s  {verdict(stage_submit - floor <= 1.5)}")
    mk("run", c, "--remote", state.url)
    idle = mk("run", c, "--remote", state.url)
    print(f"example DAG with nothing new                             {idle:7.2f} s  "
          f"target <= 1.00 s  {verdict(idle <= 1.0)}")
    for line in second_pipeline(e, warm):
        print(line)

    if args.rows:
        for line in staging_on_engine(state.url, tmp, args.rows):
            print(line)
    stop_engine(engine_of_b)


def second_pipeline(copy: Path, warm: float) -> list[str]:
    """Another pipeline file (its own ledger) run with the default engine: it finds the running
    engine (no second JVM); then the memory the idle engine's JVM holds."""
    from minikafka.spark.engines import recorded, rss_bytes

    seconds = mk("run", copy, "--engine", "auto")
    found = recorded()
    shared = len(found) == 1
    rss = rss_bytes(found[0][1].jvm_pid) if found else None
    memory = f"{rss / (1 << 20):,.0f} MB" if rss else "unknown"
    return [f"example DAG, a second pipeline file on the running engine {seconds:6.2f} s  (warm {warm:.2f} s)  "
            f"engines running: {len(found)}  target 1 (no second JVM)  {verdict(shared)}",
            f"idle engine's JVM memory (RSS), serving both pipeline files  {memory}  "
            f"(before: one engine per pipeline file, 1.1-1.4 GB each)"]


def staging_on_engine(url: str, tmp: Path, rows: int) -> list[str]:
    """bench_staging's stage (select + arithmetic, dedup on a string key) over ``rows`` rows, on the
    engine: once with keys numbered in order, once with keys in random order."""
    from bench_spark import fill, make_topics, stage

    from minikafka import Source
    from minikafka.spark import run_stage
    from minikafka.spark.engine import connect

    spark = connect(url)
    lines = []
    try:
        for label, count, keys in (("warm-up", 2000, "sorted"), ("sorted", rows, "sorted"),
                                   ("random", rows, "random")):
            path = str(tmp / f"staging-{label}.sqlite")
            with Source(path) as src:
                make_topics(src)
                fill(src, "items", 1, count, "new", keys=keys)
                t0 = time.perf_counter()
                result = run_stage(spark, src, stage())
                seconds = time.perf_counter() - t0
            if label != "warm-up":
                rate = rows / seconds
                order = "keys in order " if keys == "sorted" else "random keys   "
                lines.append(f"bench_staging's {rows:,}-row stage, warm engine, {order}{seconds:6.2f} s "
                             f"{rate:10,.0f} rows/s  (spark {result.details.get('spark_seconds', 0):.2f} s, commit "
                             f"{result.details.get('commit_seconds', 0):.2f} s)  target >= 250,000  "
                             f"{verdict(rate >= 250_000)}")
    finally:
        spark.stop()
    return lines


if __name__ == "__main__":
    sys.exit(exit_code(main))

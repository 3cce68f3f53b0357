"""Benchmark one Prometheus scrape of a ledger (``minikafka metrics``, the console's ``/metrics``).

The ledger: T topics of N rows each (default 2 x 1,000,000), S stages (default 100) with R
runs each (default 20: succeeded, some failed), each stage a consumer of one topic at its own
offset (a group commit: lag from the row marks, no ack rows), a work queue with jobs and dead
letters, and a quarantine of 1,000 rows. One scrape opens the ledger read-only, reads every
figure in one read transaction and formats the exposition (``observe.scrape.exposition``).

Target: a scrape takes at most 200 ms (p95 of ``--repeat`` scrapes, after one warm-up).
The reads use the ledger's row marks and indexes (``ledger.consuming.metrics_read``), not counts over
the rows: the time does not grow with N. Prints p50 and p95 beside the target; exits 1 on a miss.

Usage: python scripts/bench_metrics.py [--rows 1000000] [--topics 2] [--stages 100] [--runs 20] [--repeat 20]
(run it under the machine-wide lock: flock /tmp/minikafka-heavy.lock python scripts/bench_metrics.py)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import exit_code, scratch_dir  # noqa: E402

from minikafka import Source  # noqa: E402
from minikafka.ledger.consuming import (  # noqa: E402
    Quarantined,
    RunResult,
    quarantine_in_current_transaction,
    write_run_in_current_transaction,
)
from minikafka.observe.scrape import PipelineScope, exposition  # noqa: E402

TARGET_MS = 200.0


class Item(BaseModel):
    url: str
    score: float


class Job(BaseModel):
    url: str


def build(path: Path, rows: int, topics: int, stages: int, runs: int) -> list[str]:
    names = [f"stage_{i:03d}" for i in range(stages)]
    with Source(path) as source:
        for t in range(topics):
            items = source.topic(f"items_{t}", Item, dedup=None)
            step = 100_000
            for lo in range(0, rows, step):
                items.extend([{"url": f"https://example.com/{t}/{i}", "score": (i % 100) / 100}
                              for i in range(lo, min(rows, lo + step))])
        for i, stage in enumerate(names):
            topic = f"items_{i % topics}"
            source.topic(topic, Item, dedup=None).consumer(stage)
            source.group(stage).commit(topic, 0, rows * (i + 1) // (stages + 1))
        queue = source.queue("jobs", Job, max_attempts=1)
        for i in range(200):
            queue.enqueue({"url": f"https://example.com/job/{i}"})
        for _ in range(20):
            queue.claim_one("w").fail("boom")
        with source.ledger.atomic() as conn:
            quarantine_in_current_transaction(conn, [
                Quarantined("items_0", '{"url": "bad"}', f"reason {i}", f"dump.jsonl:{i}", "2026-01-01T00:00:00.000000Z")
                for i in range(1000)])
            for n in range(runs):
                for i, stage in enumerate(names):
                    run = RunResult(f"run-{n:04d}-{i:03d}", "stage", stage=stage, consumer=stage,
                                    inputs=[f"items_{i % topics}"], rows_in=1000, rows_out=900)
                    run.finish("failed" if (n + i) % 7 == 0 else "succeeded", None if (n + i) % 7 else "boom")
                    write_run_in_current_transaction(conn, run)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--topics", type=int, default=2)
    parser.add_argument("--stages", type=int, default=100)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    path = scratch_dir("mk-bench-metrics-") / "metrics.sqlite"
    t0 = time.perf_counter()
    names = build(path, args.rows, args.topics, args.stages, args.runs)
    print(f"built {args.topics} topic(s) x {args.rows:,} rows, {args.stages} stages x {args.runs} runs "
          f"in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    scopes = [PipelineScope("bench", tuple(names))]
    text = exposition(path, scopes)  # warm-up
    took = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        exposition(path, scopes)
        took.append((time.perf_counter() - t) * 1000)
    took.sort()
    p50 = statistics.median(took)
    p95 = took[min(len(took) - 1, int(round(0.95 * (len(took) - 1))))]
    print(f"exposition: {len(text.splitlines())} lines, {len(text):,} bytes", file=sys.stderr)
    print(f"scrape ({args.stages} stages, {args.topics} x {args.rows:,}-row topics) p50 {p50:.1f} ms, "
          f"p95 {p95:.1f} ms (target <= {TARGET_MS:.0f} ms) {'PASS' if p95 <= TARGET_MS else 'FAIL'}")


if __name__ == "__main__":
    sys.exit(exit_code(main))

"""Benchmark the web console's pages (``minikafka ui``): p50 and p95 per page.

The ledger: a topic of N rows (default 1,000,000) with two consumers (one caught up, one
half-way), a queue with jobs, a quarantine of 1,000 rows and R runs (default 1,000) of five
stages with quality results. Each page is asked ``--repeat`` times through the ASGI app in
this process (Starlette's TestClient: the server's own work, no socket), after one warm-up.

Target: every page answers in under 200 ms at p95 on this machine.
Prints each page's p50 and p95 beside the target; exits 1 when one is missed.

Usage: python scripts/bench_ui.py [--rows 1000000] [--runs 1000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
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

TARGET_MS = 200.0
STAGES = ("split", "enrich", "summarise", "score", "publish")


class Item(BaseModel):
    url: str
    feed: str
    score: float


class Job(BaseModel):
    url: str


def build(path: Path, rows: int, runs: int) -> None:
    with Source(path) as source:
        items = source.topic("items", Item, dedup=("url",))
        step = 100_000
        for lo in range(0, rows, step):
            items.extend([{"url": f"https://example.com/{i}", "feed": f"feed-{i % 17}", "score": (i % 100) / 100}
                          for i in range(lo, min(rows, lo + step))])
        items.consumer("caught_up")
        items.consumer("half_way")
        source.group("caught_up").commit("items", 0, rows)
        source.group("half_way").commit("items", 0, rows // 2)
        queue = source.queue("jobs", Job, max_attempts=1)
        for i in range(200):
            queue.enqueue({"url": f"https://example.com/job/{i}"})
        for _ in range(20):
            queue.claim_one("w").fail("boom")
        queue.schedule("hourly", every=3600, payload={"url": "https://example.com/h"})
        with source.ledger.atomic() as conn:
            quarantine_in_current_transaction(conn, [
                Quarantined("items", '{"url": "bad"}', f"reason {i}", f"dump.jsonl:{i}", "2026-01-01T00:00:00.000000Z")
                for i in range(1000)])
            quality = {"suites": [{"suite": "s", "topic": "items", "policy": "warn", "success": False,
                                   "quarantined_rows": 0, "results": [
                                       {"expectation": "expect_column_values_to_not_be_null", "column": "url",
                                        "success": False, "unexpected_count": 3, "element_count": 100,
                                        "unexpected_percent": 3.0, "unexpected_sample": [None]}]}]}
            for n in range(runs):
                stage = STAGES[n % len(STAGES)]
                run = RunResult(f"run-{n:06d}", "stage", stage=stage, consumer=stage, inputs=["items"],
                                outputs=["items"], rows_in=1000, rows_out=900, quality=quality)
                run.finish("succeeded" if n % 50 else "failed", None if n % 50 else "boom")
                write_run_in_current_transaction(conn, run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from minikafka.console.app import create_app

    path = scratch_dir("bench-ui-") / "ledger.sqlite"
    t0 = time.perf_counter()
    build(path, args.rows, args.runs)
    print(f"ledger: {args.rows:,} rows, {args.runs:,} runs, built in {time.perf_counter() - t0:.1f} s")
    mid = args.rows // 2
    pages = ["/", "/runs", "/runs?stage=score", "/runs/run-000007", "/topics", "/topics/items",
             f"/topics/items?after={mid}", f"/topics/items?before={args.rows}", "/topics/items?where=feed%3Dfeed-3",
             "/quarantine", "/quarantine/500", "/queues", "/schedules", "/groups"]
    print(f"{'page':42} {'p50 ms':>8} {'p95 ms':>8}  target p95 < {TARGET_MS:.0f} ms")
    with TestClient(create_app(path), base_url="http://127.0.0.1") as client:
        for page in pages:
            assert client.get(page).status_code == 200, page
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                response = client.get(page)
                times.append((time.perf_counter() - start) * 1000)
                assert response.status_code == 200, page
            times.sort()
            p50 = statistics.median(times)
            p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
            verdict = "PASS" if p95 < TARGET_MS else "FAIL"
            print(f"{page:42} {p50:8.1f} {p95:8.1f}  {verdict}")


if __name__ == "__main__":
    sys.exit(exit_code(main))

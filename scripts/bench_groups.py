"""Benchmark consumer groups and HTTP delivery (issue 12 targets), in one run.

1. fetch + commit of one process over N rows (default 1,000,000) of a file-backed topic,
   ``max_messages=1000``: typed Records built, one commit per batch.
   Target: >= 200,000 messages/s (klite says it is not meant for more than 10,000/s).
2. One commit covering N rows (the group has not committed anything before).
   Target: < 10 ms, the same as a commit covering 10 rows.
3. Delivery by the worker (``minikafka.connectors.delivery``) to a local HTTP server that
   answers 200 at once, batch 500, over D rows (default 200,000), one partition.
   Target: >= 20,000 messages/s.

Prints each figure beside its target; exits 1 when one is missed.

Usage: python scripts/bench_groups.py [--rows 1000000] [--delivery-rows 200000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from pydantic import BaseModel

from minikafka import Source


class Order(BaseModel):
    order_id: int
    user: str
    amount: float


def fill(path: Path, n: int, topic: str = "orders") -> None:
    with Source(path) as src:
        t = src.topic(topic, Order, dedup=None)
        step = 100_000
        for lo in range(0, n, step):
            t.extend([{"order_id": i, "user": f"user-{i % 977}", "amount": i * 0.5} for i in range(lo, min(n, lo + step))])


def bench_fetch_commit(path: Path, n: int) -> tuple[float, int]:
    with Source(path) as src:
        orders = src.topic("orders", Order, dedup=None)
        group = src.group("bench-consumer")
        group.fetch(orders, 0, 1)  # registers the group before the clock starts
        seen = 0
        t0 = time.perf_counter()
        while True:
            batch = group.fetch(orders, 0, max_messages=1000)
            if not batch:
                break
            seen += len(batch)
            group.commit(orders, 0, batch[-1].offset)
        elapsed = time.perf_counter() - t0
    return seen / elapsed, seen


def bench_one_commit(path: Path, n: int) -> tuple[float, float]:
    with Source(path) as src:
        orders = src.topic("orders", Order, dedup=None)
        small, big = src.group("bench-small"), src.group("bench-big")
        small.fetch(orders, 0, 1)
        big.fetch(orders, 0, 1)
        t0 = time.perf_counter()
        small.commit(orders, 0, 10)
        t_small = time.perf_counter() - t0
        t0 = time.perf_counter()
        big.commit(orders, 0, n)
        t_big = time.perf_counter() - t0
        assert big.lag(orders) == {0: 0}
    return t_big * 1000, t_small * 1000


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a real server answers in one segment; without it each answer waits for a delayed ACK
    received = 0

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def bench_delivery(workdir: Path, n: int) -> tuple[float, int]:
    from minikafka.connectors.delivery import DeliverySpec, DeliveryWorker

    path = workdir / "deliver.sqlite"
    fill(path, n)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    spec = DeliverySpec(name="bench-delivery", topic="orders", endpoint=f"http://{host}:{port}/ingest",
                        batch_size=500, interval=0.05, timeout=5.0)
    worker = DeliveryWorker(str(path), [spec], once=True, progress=None)
    t0 = time.perf_counter()
    summary = worker.run()
    elapsed = time.perf_counter() - t0
    server.shutdown()
    return summary.delivered / elapsed, summary.delivered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--delivery-rows", type=int, default=200_000)
    args = parser.parse_args()
    misses = []
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        work = Path(tmp)
        path = work / "groups.sqlite"
        t0 = time.perf_counter()
        fill(path, args.rows)
        print(f"filled {args.rows:,} rows in {time.perf_counter() - t0:.1f} s")

        rate, seen = bench_fetch_commit(path, args.rows)
        ok = rate >= 200_000 and seen == args.rows
        misses += [] if ok else ["fetch+commit"]
        print(f"fetch+commit, max_messages=1000:   {rate:>12,.0f} msg/s   target >= 200,000   "
              f"({seen:,} rows) {'ok' if ok else 'MISSED'}")

        big_ms, small_ms = bench_one_commit(path, args.rows)
        ok = big_ms < 10
        misses += [] if ok else ["one commit"]
        print(f"one commit covering {args.rows:,} rows: {big_ms:>9.2f} ms       target < 10 ms        "
              f"(10 rows: {small_ms:.2f} ms) {'ok' if ok else 'MISSED'}")

        rate, delivered = bench_delivery(work, args.delivery_rows)
        ok = rate >= 20_000 and delivered == args.delivery_rows
        misses += [] if ok else ["delivery"]
        print(f"delivery to local HTTP, batch 500:  {rate:>12,.0f} msg/s   target >= 20,000    "
              f"({delivered:,} rows) {'ok' if ok else 'MISSED'}")
    if misses:
        print("missed: " + ", ".join(misses))
        return 1
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())

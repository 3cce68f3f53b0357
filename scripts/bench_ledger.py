"""Benchmark the pure-Python ledger (issue 2 targets), in one run.

1. ``extend()`` of N rows (3 fields, dedup on one) into a file-backed topic, against raw
   ``sqlite3.executemany`` into an equivalent table (same columns, UNIQUE on the key, same
   WAL/synchronous settings). Target: extend at least 0.4x the raw rate, pydantic
   validation included. Validation alone is timed too, so both parts are visible.
2. A row-level ``pipe(fn).to(t).run()`` of M rows on a file. Target: >= 20,000 rows/s.
3. 1 again with keys in random order (a hash in each URL, as real keys arrive): the raw
   table's URL index then takes them in random order too, as the topic's ``_key`` index
   always does (its keys are hashes). Printed for comparison, no target.

Usage: python scripts/bench_ledger.py [--rows 1000000] [--pipe-rows 100000] [--keys both|sorted]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys
import tempfile
import time
from pathlib import Path

from bench_common import exit_code
from pydantic import BaseModel, TypeAdapter

from minikafka import Source
from minikafka.ledger.transactions.connection import connect


class Item(BaseModel):
    url: str
    title: str
    score: int


class Scored(BaseModel):
    url: str
    score: int


def rows(n: int, *, random_keys: bool = False) -> list[dict]:
    """Numbered URLs (they reach a URL index nearly in order), or with ``random_keys`` a hash
    in each URL, as real ones arrive (``generate_demo_data.py --keys random``)."""
    if random_keys:
        return [{"url": f"https://example.com/{hashlib.blake2b(str(i).encode(), digest_size=6).hexdigest()}/{i}",
                 "title": f"title {i}", "score": i % 1000} for i in range(n)]
    return [{"url": f"https://example.com/{i}", "title": f"title {i}", "score": i % 1000} for i in range(n)]


def bench_raw(path: Path, data: list[dict]) -> float:
    conn = connect(str(path))
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, url TEXT NOT NULL, title TEXT NOT NULL, "
                 "score INTEGER NOT NULL) STRICT")
    conn.execute("CREATE UNIQUE INDEX items_url ON items (url)")
    t0 = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO items (url, title, score) VALUES (?, ?, ?)",
                     [(r["url"], r["title"], r["score"]) for r in data])
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def bench_extend(path: Path, data: list[dict]) -> float:
    with Source(path) as src:
        topic = src.topic("items", Item, dedup=("url",))
        t0 = time.perf_counter()
        written = topic.extend(data)
        elapsed = time.perf_counter() - t0
        assert written == len(data)
    return elapsed


def bench_validation(data: list[dict], *, pause_gc: bool) -> float:
    adapter = TypeAdapter(list[Item])
    if pause_gc:
        gc.disable()
    t0 = time.perf_counter()
    adapter.validate_python(data)
    elapsed = time.perf_counter() - t0
    gc.enable()
    return elapsed


def bench_pipe(path: Path, n: int) -> float:
    with Source(path) as src:
        items = src.topic("items", Item, dedup=("url",))
        scored = src.topic("scored", Scored, dedup=("url",))
        items.extend(rows(n))
        t0 = time.perf_counter()
        out = items.pipe(lambda i: Scored(url=i.url, score=i.score * 2)).to(scored).run()
        elapsed = time.perf_counter() - t0
        assert len(out) == n and scored.count() == n and items.count("new") == 0
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--pipe-rows", type=int, default=100_000)
    parser.add_argument("--keys", choices=["both", "sorted"], default="both",
                        help="sorted: numbered URLs only (the target's case); both: also keys in random order")
    args = parser.parse_args()
    data = rows(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        raw = bench_raw(tmp / "raw.sqlite", data)
        validation = bench_validation(data, pause_gc=False)
        validation_paused = bench_validation(data, pause_gc=True)
        ext = bench_extend(tmp / "extend.sqlite", data)
        pipe = bench_pipe(tmp / "pipe.sqlite", args.pipe_rows)
        shuffled = None
        if args.keys == "both":
            del data
            data = rows(args.rows, random_keys=True)
            shuffled = (bench_raw(tmp / "raw-random.sqlite", data), bench_extend(tmp / "extend-random.sqlite", data))
    n = args.rows
    print(f"rows                         {n:>12,}")
    print(f"raw sqlite3.executemany      {raw:8.2f} s  {n / raw:12,.0f} rows/s")
    print(f"pydantic validation alone    {validation:8.2f} s  {n / validation:12,.0f} rows/s  (gc on)")
    print(f"pydantic validation alone    {validation_paused:8.2f} s  {n / validation_paused:12,.0f} rows/s  "
          "(gc paused, as extend does)")
    print(f"Topic.extend (validated)     {ext:8.2f} s  {n / ext:12,.0f} rows/s")
    print(f"  of which storage+encoding  {ext - validation_paused:8.2f} s  (extend minus paused validation)")
    ratio = raw / ext
    print(f"extend / raw rate            {ratio:8.2f}     target >= 0.40  {'PASS' if ratio >= 0.4 else 'FAIL'}")
    if shuffled is not None:
        raw_r, ext_r = shuffled
        print("with keys in random order (URLs with a hash in the path, as real ones arrive):")
        print(f"raw sqlite3.executemany      {raw_r:8.2f} s  {n / raw_r:12,.0f} rows/s")
        print(f"Topic.extend (validated)     {ext_r:8.2f} s  {n / ext_r:12,.0f} rows/s")
        print(f"extend / raw rate            {raw_r / ext_r:8.2f}     (no target)")
    rate = args.pipe_rows / pipe
    print(f"row-level pipe().to().run()  {pipe:8.2f} s  {rate:12,.0f} rows/s  "
          f"({args.pipe_rows:,} rows) target >= 20,000  {'PASS' if rate >= 20_000 else 'FAIL'}")


if __name__ == "__main__":
    sys.exit(exit_code(main))

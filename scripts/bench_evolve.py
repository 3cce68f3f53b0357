"""Benchmark additive schema evolution (issue 42 item 3): add optional fields to a 10M-row topic.

1. Create the topic ``readings`` (model ``Reading``: sensor, value) through the library, then
   fill its table with ``--rows`` rows in one ``WITH RECURSIVE`` insert (not timed: a plain
   SQLite statement on the scratch file, the fastest way to a large table).
2. Time ``Source.evolve("readings", ReadingV2)``: three fields added (a str and a datetime,
   both Optional, and a bool with a default, which has a CHECK constraint), the stored schema
   updated in the same transaction, its COMMIT included. Target: < 1 s, whatever the rows.
3. Check the result: an old row reads the defaults, a new row stores the fields, the file
   did not grow by a copy of the table, ``PRAGMA quick_check`` passes (not timed).

The scratch directory is removed at exit; exit status 1 when the target is missed. About
400 MB of disk and ~15 s to build at 10M rows: run it under the machine's heavy lock.
Usage: python scripts/bench_evolve.py [--rows 10000000]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

TARGET_S = 1.0


class Reading(BaseModel):
    sensor: str
    value: int


class ReadingV2(BaseModel):
    sensor: str
    value: int
    unit: str | None = None
    calibrated: bool = False
    seen_at: datetime | None = None


def build(path: str, rows: int) -> None:
    """The topic through the library, its rows by one recursive insert."""
    from minikafka import Source

    with Source(path) as src:
        src.topic("readings", Reading, dedup=None)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(
            'INSERT INTO "readings" ("_created_at", "sensor", "value") '
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < ?) "
            "SELECT '2026-01-01T00:00:00.000000Z', 'sensor-' || (i % 1000), i FROM r", (rows,))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def evolve(path: str) -> tuple[float, list[str]]:
    """Seconds the evolve took and what it did."""
    from minikafka import Source

    with Source(path) as src:
        started = time.perf_counter()
        plan = src.evolve("readings", ReadingV2)
        took = time.perf_counter() - started
    return took, plan.describe()


def check(path: str, pages_before: int) -> None:
    from minikafka import Source

    with Source(path) as src:
        t = src.topic("readings", ReadingV2, dedup=None)
        first = next(iter(t.iter_new()))
        assert first.unit is None and first.calibrated is False and first.seen_at is None, first
        t.append({"sensor": "new", "value": 1, "unit": "C", "calibrated": True})
        pages = src.ledger.conn.execute("PRAGMA page_count").fetchone()[0]
        assert pages < pages_before + 100, (pages_before, pages)
        assert src.ledger.conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-evolve-") as tmp:
        path = str(Path(tmp) / "ledger.sqlite")
        started = time.perf_counter()
        build(path, args.rows)
        print(f"built {args.rows:,} rows in {time.perf_counter() - started:.1f} s (not timed)")
        pages = sqlite3.connect(path).execute("PRAGMA page_count").fetchone()[0]
        took, lines = evolve(path)
        for line in lines:
            print(f"  {line}")
        ok = took < TARGET_S
        print(f"evolve (3 fields added) at {args.rows:,} rows: {took:.4f} s   target < {TARGET_S:.1f} s   "
              f"{'ok' if ok else 'MISSED'}")
        check(path, pages)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

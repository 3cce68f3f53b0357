"""Ledgers the console tests read: the shipped example after a real run, plus what the modes keep.

``add_modes`` gives a ledger what the example pipeline alone does not hold: a work queue with
a pending job and a dead one, a schedule, and a consumer group with a committed offset; and a
failed run whose error quotes secrets, which no page may show.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

from examples.myjobs import Summarise  # the shipped queue model: the console process imports it by name
from minikafka import Source
from minikafka.ledger.consuming import (
    Quarantined,
    RunResult,
    quarantine_in_current_transaction,
    write_run_in_current_transaction,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("conf", "schemas", "jobs", "examples")
SECRETS = ("hunter22", "sk-live-0123456789", "abcdef-token-42")
SECRET_ERROR = (f"POST https://bot:{SECRETS[0]}@llm.example/v1?token={SECRETS[2]} failed: 401 "
                f"(Authorization: Bearer {SECRETS[1]})")


def scratch_example(base: Path) -> Path:
    """The shipped example's files in ``base`` (as a reader's checkout), with an empty data/."""
    for name in SHIPPED:
        shutil.copytree(ROOT / name, base / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (base / "data").mkdir()
    return base


def ingest_example(base: Path) -> None:
    """``minikafka ingest conf/homelab.toml rss.items examples/feed.jsonl``, as the README does."""
    subprocess.run([sys.executable, "-m", "minikafka.cli", "ingest", "conf/homelab.toml", "rss.items",
                    "examples/feed.jsonl"], cwd=base, check=True, capture_output=True, text=True)


def add_modes(path: Path) -> None:
    """A queue (jobs 1 and 2 dead, job 3 pending), a schedule, a consumer group at offset 5 of rss.items,
    and a failed run quoting secrets."""
    with Source(path) as source:
        queue = source.queue("jobs.summarise", Summarise, max_attempts=1)
        for i in range(3):
            queue.enqueue({"url": f"https://example.com/{i}", "body": f"article {i}"})
        for _ in range(2):
            queue.claim_one("worker-1").fail("summariser crashed")
        queue.schedule("hourly-digest", every=3600, payload={"url": "https://example.com/digest", "body": "digest"})
        group = source.group("dashboard")
        group.commit("rss.items", 0, 5)
        failed = RunResult("run-20260101T030000Z-secret00", "stage", stage="notify", inputs=["rss.scored"])
        failed.finish("failed", SECRET_ERROR)
        with source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, failed)


def copy_ledger(data_dir: Path, target: Path) -> Path:
    """A copy of a closed ledger's directory (the file, its quality reports) at ``target``."""
    shutil.copytree(data_dir, target)
    return target / "homelab.sqlite"


class Item(BaseModel):
    url: str
    feed: str
    title: str


def small_ledger(path: Path) -> Path:
    """A small ledger without Spark: 120 rows of rss.items (30 handled by split_youtube), one quarantined
    row whose payload holds a secret, and ``add_modes``."""
    with Source(path) as source:
        items = source.topic("rss.items", Item, dedup=("url",))
        items.extend([{"url": f"https://example.com/{i}", "feed": "lwn.net" if i % 2 else "hn", "title": f"t{i}"}
                      for i in range(1, 121)])
        items.consumer("split_youtube")
        for row_id in range(1, 31):
            items.set_handled(row_id, consumer="split_youtube")
        with source.ledger.atomic() as conn:
            quarantine_in_current_transaction(conn, [Quarantined(
                "rss.items", json.dumps({"url": "ftp://nope", "api_key": SECRETS[1]}), "url: not http(s)",
                "feed.jsonl:7", "2026-01-01T00:00:00.000000Z")])
    add_modes(path)
    return path

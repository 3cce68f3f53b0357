"""minikafka topics shows each group's committed offset and lag per partition."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

from minikafka import Source

ROOT = Path(__file__).resolve().parents[2]


class Order(BaseModel):
    user: str
    n: int


def cli(*args):
    return subprocess.run([sys.executable, "-m", "minikafka.cli", *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, cwd=ROOT)


def test_topics_shows_committed_offset_and_lag_per_partition(db_path):
    with Source(db_path) as src:
        orders = src.topic("orders", Order, dedup=None, partitions=2)
        orders.extend([{"user": "u", "n": n} for n in range(6)])
        src.group("order-processors").commit(orders, 0, 4)
    out = cli("topics", "--source", db_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].split()[:6] == ["orders", "4", "2", "0", "2", "order-processors"]
    assert "p0: committed 4 lag 1  p1: committed 0 lag 3" in lines[2]


def test_show_reports_rows_a_group_committed_as_handled(db_path):
    with Source(db_path) as src:
        orders = src.topic("orders", Order, dedup=None)
        orders.extend([{"user": "u", "n": n} for n in range(3)])
        src.group("g").commit(orders, 0, 2)
    shown = cli("show", "orders", "--source", db_path, "--status", "handled")
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [(r["_id"], r["_status"]) for r in rows] == [(1, "handled"), (2, "handled")]

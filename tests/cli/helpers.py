"""Run the real minikafka command (click's runner) on a ledger file, then reopen the file."""

from __future__ import annotations

import sqlite3

from click.testing import CliRunner
from pydantic import BaseModel

from minikafka import Source
from minikafka.cli import main


class Item(BaseModel):
    title: str
    url: str
    score: float
    lang: str | None = None


def invoke(*args, input=None, env=None):
    """The command with the caller's environment minus minikafka's variables (unless given in ``env``)."""
    runner = CliRunner()
    clean = {"MINIKAFKA_SOURCE": None, "MINIKAFKA_PIPELINE": None, "MINIKAFKA_VERBOSE": None, **(env or {})}
    return runner.invoke(main, [str(a) for a in args], input=input, env=clean, catch_exceptions=False)


def seed(path, n=5, consumers=("clean",)):
    with Source(path) as src:
        t = src.topic("items", Item, dedup=("url",))
        t.extend([{"title": f"t{i}", "url": f"u{i}", "score": i / 10, "lang": "en" if i % 2 else None}
                  for i in range(n)])
        for c in consumers:
            t.consumer(c)
    return path


def damage_table_root(ledger: str, table: str) -> None:
    """Overwrite the root page of ``table``: the file still opens, ``PRAGMA quick_check`` fails."""
    conn = sqlite3.connect(ledger, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = DELETE")  # the log folded in: the page is in the file
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?", (table,)).fetchone()[0]
    finally:
        conn.close()
    with open(ledger, "r+b") as fh:
        fh.seek((root - 1) * page_size)
        fh.write(b"\xff" * page_size)

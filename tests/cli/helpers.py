"""Run the real minikafka command (click's runner) on a ledger file, then reopen the file."""

from __future__ import annotations

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

"""Processes that keep writing a ledger while a test backs it up or replicates it.

    python -m tests.ledger.ledger_writers append LEDGER STOPFILE   # one append per commit, seq 0, 1, 2...
    python -m tests.ledger.ledger_writers stage LEDGER STOPFILE    # stage-like commits: src -> dst, acks, run row

Both run until STOPFILE exists. The appender writes ``events`` rows with a growing ``seq``;
the stager repeatedly takes every ``src`` row pending for consumer ``copier`` and commits
one ``dst`` row per input, its acks and its run row in one transaction (``commit_stage``),
as a Spark stage's commit does.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pydantic import BaseModel

from minikafka import Source


class Event(BaseModel):
    seq: int


class Item(BaseModel):
    n: int
    text: str


def make_ledger(path: str, *, src_rows: int = 0) -> None:
    """A ledger with topics ``events``, ``src`` (``src_rows`` rows) and ``dst``."""
    with Source(path) as source:
        source.topic("events", Event, dedup=("seq",))
        src = source.topic("src", Item, dedup=("n",))
        source.topic("dst", Item, dedup=("n",))
        if src_rows:
            src.extend([{"n": i, "text": f"item {i} " + "x" * 40} for i in range(src_rows)])


def append(path: str, stop: Path) -> None:
    seq = 0
    with Source(path) as source:
        events = source.topic("events", Event, dedup=("seq",))
        while not stop.exists():
            events.append({"seq": seq})
            seq += 1


def stage(path: str, stop: Path) -> None:
    import pyarrow as pa

    from minikafka.ledger.consuming import RunResult, new_run_id
    from minikafka.ledger.transactions import InputState, StagedOutput, commit_stage

    with Source(path) as source:
        src = source.topic("src", Item, dedup=("n",))
        dst = source.topic("dst", Item, dedup=("n",))
        src.consumer("copier")
        n = src.count()
        while not stop.exists():
            src.extend([{"n": n + i, "text": f"item {n + i}"} for i in range(500)])
            n += 500
            pending = list(src.iter_new(consumer="copier", records=True))
            if not pending:
                time.sleep(0.01)
                continue
            upto = max(r.id for r in pending)
            batch = pa.record_batch({"n": [r.data.n for r in pending], "text": [r.data.text for r in pending],
                                     "_parent_id": [r.id for r in pending]})
            run = RunResult(new_run_id("copier"), "stage", stage="copier", consumer="copier", inputs=["src"],
                            outputs=["dst"], rows_in=len(pending))
            commit_stage(source.ledger, run, consumer="copier",
                         inputs=[InputState("src", upto, len(pending))],
                         outputs=[StagedOutput(dst.layout, [batch])], default_parent_topic="src")


if __name__ == "__main__":
    kind, ledger, stop_file = sys.argv[1:4]
    {"append": append, "stage": stage}[kind](ledger, Path(stop_file))

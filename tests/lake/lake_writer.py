"""A stage-like commit into a topic with an Iceberg target, as a process a test can kill.

    python -m tests.lake.lake_writer LEDGER [ROW_GROUP_ROWS]  # src rows pending for 'copier' -> dst (+ its table)

Takes every ``src`` row pending for consumer ``copier`` and commits one ``dst`` row per input,
its acks, its run row and the ``dst`` Iceberg target's new snapshot in one transaction
(``commit_stage`` with the lake's finishers), as a Spark stage's commit does. With
$MINIKAFKA_FREEZE_AT set, it freezes at that checkpoint for the test to kill it.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel

from minikafka import Source


class Item(BaseModel):
    n: int
    text: str
    bucket: int


def make_ledger(path: str, location: str, *, src_rows: int = 0, delta: bool = False, parquet: bool = False) -> None:
    """A ledger with topics ``src`` (``src_rows`` rows) and ``dst``, and lake target ``dst`` at
    ``location`` (Iceberg; Delta when ``delta``; a Parquet export when ``parquet``), partitioned
    by ``bucket``."""
    from minikafka.ledger.lake import DeltaTarget, IcebergTarget, ParquetTarget, declare

    with Source(path) as source:
        src = source.topic("src", Item, dedup=("n",))
        source.topic("dst", Item, dedup=("n",))
        src.consumer("copier")
        add_rows(source, 0, src_rows)
        kind = DeltaTarget if delta else ParquetTarget if parquet else IcebergTarget
        declare(source.ledger, [kind("dst", "dst", location, partition_by=("bucket",))])


def add_rows(source: Source, first: int, count: int) -> None:
    source.topic("src", Item, dedup=("n",)).extend(
        [{"n": i, "text": f"item {i}", "bucket": i % 3} for i in range(first, first + count)])


def copy_pending(path: str, *, before=(), after=()) -> int:
    """One stage-like commit of everything pending; returns the rows committed into ``dst``.
    ``before``/``after``: more finishers run around the lake's (a test's failure or race)."""
    import pyarrow as pa

    from minikafka.ledger.consuming import RunResult, new_run_id
    from minikafka.ledger.lake import finishers_for
    from minikafka.ledger.transactions import InputState, StagedOutput, commit_stage

    with Source(path) as source:
        src = source.topic("src", Item, dedup=("n",))
        dst = source.topic("dst", Item, dedup=("n",))
        pending = list(src.iter_new(consumer="copier", records=True))
        upto = max((r.id for r in pending), default=0)
        batch = pa.record_batch({"n": [r.data.n for r in pending], "text": [r.data.text.upper() for r in pending],
                                 "bucket": [r.data.bucket for r in pending], "_parent_id": [r.id for r in pending]})
        run = RunResult(new_run_id("copier"), "stage", stage="copier", consumer="copier", inputs=["src"],
                        outputs=["dst"], rows_in=len(pending))
        commit_stage(source.ledger, run, consumer="copier", inputs=[InputState("src", upto, len(pending))],
                     outputs=[StagedOutput(dst.layout, [batch])], default_parent_topic="src",
                     finishers=[*before, *finishers_for(source.ledger.conn, ["dst"]), *after])
        return run.rows_out


def append_and_sync(path: str, topic: str, rounds: int) -> None:
    """``rounds`` commits, each appending 50 rows to ``topic`` and syncing its lake target in the
    same transaction (another pipeline's stage, writing another table of the same catalog)."""
    import pyarrow as pa

    from minikafka.ledger.consuming import RunResult, new_run_id
    from minikafka.ledger.lake import finishers_for
    from minikafka.ledger.transactions import StagedOutput, commit_stage

    with Source(path, busy_timeout=120) as source:
        out = source.topic(topic, Item, dedup=("n",))
        for r in range(rounds):
            batch = pa.record_batch({"n": list(range(r * 50, r * 50 + 50)), "text": ["x"] * 50,
                                     "bucket": [i % 3 for i in range(50)]})
            commit_stage(source.ledger, RunResult(new_run_id(topic), "stage", stage=topic, consumer=topic),
                         consumer=topic, inputs=[], outputs=[StagedOutput(out.layout, [batch])],
                         finishers=finishers_for(source.ledger.conn, [topic]))


if __name__ == "__main__":
    if sys.argv[1] == "race":
        append_and_sync(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        if len(sys.argv) > 2:  # rows per row group: files are written while the insert goes on
            from minikafka.ledger.lake import datafiles

            datafiles.ROW_GROUP_ROWS = int(sys.argv[2])
        print(copy_pending(sys.argv[1]))

"""A stage's own process for the kill tests (test_killed_runs.py): the pipeline's stage
``copy`` run as the runner runs a stage (``run_in_process``) with no engine; the test
freezes it at ``stage:started`` (util.faults), after its 'running' row, and kills it.

With ``backfill LEDGER DUMP``: a backfill of a dump with nothing to load (no engine needed),
frozen at ``backfill:started``. Also the stage's job module (``transform``) and the topics' model."""

from __future__ import annotations

import sys

from pydantic import BaseModel


class Item(BaseModel):
    url: str
    n: int


def transform(df):
    return df


def backfill_main(path: str, dump: str) -> None:
    """A backfill of ``dump`` into ``items`` with no engine (a dump with nothing to load needs none)."""
    from minikafka import Source
    from minikafka.spark.loading.backfill import backfill

    with Source(path) as src:
        src.topic("items", Item, dedup=("url",))
        print(backfill(None, src, "items", [dump]).run.status, flush=True)


if __name__ == "__main__" and sys.argv[1] == "backfill":
    backfill_main(sys.argv[2], sys.argv[3])
elif __name__ == "__main__":
    from minikafka.pipelines.definition import load_pipeline
    from minikafka.pipelines.launch.inprocess import run_in_process

    defn = load_pipeline(sys.argv[1])  # then the stage (default copy) and the run id the scheduler gave it
    outcome = run_in_process(None, defn, defn.stage(sys.argv[2] if len(sys.argv) > 2 else "copy"), False,
                             run_id=sys.argv[3] if len(sys.argv) > 3 else None)
    print(outcome.status, flush=True)

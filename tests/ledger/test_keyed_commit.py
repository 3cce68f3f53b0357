"""A stage's commit into a keyed table: merged by key next to the other outputs, the acks and
the run row, in one transaction; counts of versions and of inserted / updated / unchanged keys."""

from __future__ import annotations

from datetime import date

import pyarrow as pa
import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import ConcurrentRunError
from minikafka.ledger.consuming import RunResult, new_run_id, read_runs
from minikafka.ledger.topics import acks, keyed
from minikafka.ledger.transactions import InputState, StagedOutput, commit_stage
from minikafka.util.clock import utc_now


class Flight(BaseModel):
    flight_id: str
    carrier: str


class Daily(BaseModel):
    carrier: str
    day: date
    n: int


def rows(*items: tuple, parents: list[int] | None = None):
    cols = {"carrier": pa.array([r[0] for r in items], pa.string()),
            "day": pa.array([r[1] for r in items], pa.string()),
            "n": pa.array([r[2] for r in items], pa.int64())}
    if parents is not None:
        cols["_parent_id"] = pa.array(parents, pa.int64())
    return pa.record_batch(cols)


def setup(src: Source, n: int = 4):
    facts = src.topic("facts", Flight, dedup=("flight_id",))
    facts.extend([{"flight_id": f"f{i}", "carrier": "AA"} for i in range(n)])
    table = src.table("daily", Daily, key=("carrier", "day"), merge={"n": "sum"})
    log = src.topic("log", Flight, dedup=("flight_id",))
    with src.ledger.atomic() as conn:
        cid = acks.register_consumer_in_current_transaction(conn, "facts", "stage", utc_now())
    return facts, table, log, cid


def commit(src: Source, cid: int, upto: int, pending: int, batches, *, extra=()):
    run = RunResult(new_run_id("s"), "stage", stage="s", consumer="stage", inputs=["facts"], outputs=["daily"])
    commit_stage(src.ledger, run, consumer="stage", inputs=[InputState("facts", upto, pending, consumer_id=cid)],
                 outputs=[StagedOutput(src.layout("daily"), batches), *extra], default_parent_topic="facts")
    return run


def test_a_stage_output_into_a_keyed_table_is_merged_with_the_acks_and_the_run_row(source):
    facts, table, log, cid = setup(source)
    out_log = StagedOutput(source.layout("log"), [pa.record_batch({"flight_id": ["x"], "carrier": ["AA"]})])
    run = commit(source, cid, 2, 2, iter([rows(("AA", "2024-01-01", 1), parents=[1]),
                                          rows(("AA", "2024-01-01", 1), ("UA", "2024-01-01", 1), parents=[2, 2])]),
                 extra=[out_log])
    assert (run.rows_out, run.rows_duplicate, run.status) == (3, 1, "succeeded")  # 2 versions + 1 log row
    assert run.details["tables"] == {"daily": {"rows": 3, "inserted": 2, "updated": 0, "unchanged": 1}}
    assert table.get("AA", date(2024, 1, 1)).n == 2 and table.record("AA", date(2024, 1, 1)).parent_topic == "facts"
    assert acks.count_pending(source.ledger.conn, "facts", cid, 4) == 2
    stored = read_runs(source.ledger.conn, run_id=run.run_id)[0]
    assert stored["rows_out"] == 3 and stored["details"]["tables"]["daily"]["inserted"] == 2

    again = commit(source, cid, 4, 2, [rows(("AA", "2024-01-01", 0), ("UA", "2024-01-01", 2), parents=[3, 4])])
    assert (again.rows_out, again.rows_duplicate) == (1, 1)  # AA + 0 leaves AA's row as it was: no version
    assert again.details["tables"]["daily"] == {"rows": 2, "inserted": 0, "updated": 1, "unchanged": 1}
    assert table.count_current() == 2 and keyed.count_superseded(source.ledger.conn, "daily") == 1
    assert [r.n for r in table.iter_current()] == [2, 3]


def test_a_merge_commit_that_fails_leaves_nothing_and_the_runs_counts_as_they_were(source):
    facts, table, log, cid = setup(source)
    with source.ledger.atomic() as conn:  # another run acks a row meanwhile
        acks.ack_upto_in_current_transaction(conn, "facts", cid, 1, utc_now())
    run = RunResult(new_run_id("s"), "stage", stage="s", consumer="stage", inputs=["facts"], outputs=["daily"])
    with pytest.raises(ConcurrentRunError):
        commit_stage(source.ledger, run, consumer="stage", inputs=[InputState("facts", 2, 2, consumer_id=cid)],
                     outputs=[StagedOutput(source.layout("daily"), [rows(("AA", "2024-01-01", 1))])])
    assert (run.rows_out, run.details) == (0, None)
    assert table.count() == 0 and table.count_current() == 0


def test_a_merge_that_a_later_output_refuses_rolls_the_merge_back(source):
    facts, table, log, cid = setup(source)
    bad = StagedOutput(source.layout("log"), [pa.record_batch({"flight_id": [None], "carrier": ["AA"]})])
    run = RunResult(new_run_id("s"), "stage", stage="s", consumer="stage", inputs=["facts"], outputs=["daily"])
    with pytest.raises(Exception, match="output row of the stage; nothing was committed"):
        commit_stage(source.ledger, run, consumer="stage", inputs=[InputState("facts", 2, 2, consumer_id=cid)],
                     outputs=[StagedOutput(source.layout("daily"), [rows(("AA", "2024-01-01", 1))]), bad])
    assert table.count() == 0 and table.count_current() == 0
    assert run.rows_out == 0 and "tables" not in (run.details or {})
    assert acks.count_pending(source.ledger.conn, "facts", cid, 4) == 4

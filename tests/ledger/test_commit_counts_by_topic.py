"""A stage's commit records its counts per topic in the run's details (``rows_by_topic``): rows
read and acked per input, rows written, skipped as duplicates and set aside per output; and
an output's dedup drops keys repeated inside one batch too, the first row winning."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import ConcurrentRunError
from minikafka.ledger.consuming import RunResult, new_run_id, read_runs, runview
from minikafka.ledger.topics import acks
from minikafka.ledger.transactions import InputState, StagedOutput, commit_stage
from minikafka.util.clock import utc_now


class Item(BaseModel):
    n: int
    text: str


def setup(src: Source, *, rows: dict[str, int]):
    ids = {}
    for name, n in rows.items():
        src.topic(name, Item, dedup=("n",)).extend([{"n": i, "text": f"{name} {i}"} for i in range(n)])
        with src.ledger.atomic() as conn:
            ids[name] = acks.register_consumer_in_current_transaction(conn, name, "split", utc_now())
    for name in ("left", "right"):
        src.topic(name, Item, dedup=("n",))
    return ids


def batch(*items: tuple[int, str]):
    return pa.record_batch({"n": pa.array([i[0] for i in items], pa.int64()),
                            "text": pa.array([i[1] for i in items], pa.string())})


def test_a_stage_with_two_outputs_reports_rows_per_output_topic(source):
    ids = setup(source, rows={"items": 5})
    source.topic("left", Item, dedup=("n",)).append({"n": 0, "text": "already there"})
    run = RunResult(new_run_id("split"), "stage", stage="split", consumer="split", inputs=["items"],
                    outputs=["left", "right"], rows_in=5)
    commit_stage(source.ledger, run, consumer="split",
                 inputs=[InputState("items", 5, 5, failures={5: "transform failed"}, consumer_id=ids["items"])],
                 outputs=[StagedOutput(source.layout("left"), [batch((0, "a"), (1, "b"), (2, "c"))]),
                          StagedOutput(source.layout("right"), [batch((3, "d"))])],
                 quarantine=[("right", 4, '{"n": 4}', "expectation failed")])
    assert (run.rows_out, run.rows_duplicate, run.rows_quarantined, run.rows_failed) == (3, 1, 1, 1)
    by_topic = {"inputs": {"items": {"read": 5, "acked": 4, "failed": 1, "quarantined": 0}},
                "outputs": {"left": {"written": 2, "duplicate": 1, "quarantined": 0},
                            "right": {"written": 1, "duplicate": 0, "quarantined": 1}}}
    assert run.details["rows_by_topic"] == by_topic
    stored = read_runs(source.ledger.conn, run_id=run.run_id)[0]
    assert runview.rows_by_topic(stored) == by_topic


def test_a_stage_with_two_inputs_reports_rows_read_per_input_topic(source):
    ids = setup(source, rows={"a": 3, "b": 2})
    run = RunResult(new_run_id("join"), "stage", stage="join", consumer="split", inputs=["a", "b"],
                    outputs=["left"], rows_in=5)
    commit_stage(source.ledger, run, consumer="split",
                 inputs=[InputState("a", 3, 3, consumer_id=ids["a"]), InputState("b", 2, 2, consumer_id=ids["b"])],
                 outputs=[StagedOutput(source.layout("left"), [batch((1, "x"))])])
    assert run.details["rows_by_topic"]["inputs"] == {"a": {"read": 3, "acked": 3, "failed": 0, "quarantined": 0},
                                                      "b": {"read": 2, "acked": 2, "failed": 0, "quarantined": 0}}


def test_a_commit_that_rolls_back_leaves_no_counts_per_topic_in_the_run(source):
    ids = setup(source, rows={"items": 2})
    with source.ledger.atomic() as conn:  # another run acks a row meanwhile
        acks.ack_upto_in_current_transaction(conn, "items", ids["items"], 1, utc_now())
    run = RunResult(new_run_id("split"), "stage", stage="split", consumer="split", inputs=["items"], outputs=["left"],
                    details={"engine": "spark"})
    with pytest.raises(ConcurrentRunError):
        commit_stage(source.ledger, run, consumer="split", inputs=[InputState("items", 2, 2, consumer_id=ids["items"])],
                     outputs=[StagedOutput(source.layout("left"), [batch((1, "x"))])])
    assert run.details == {"engine": "spark"}


def test_an_old_run_row_without_counts_per_topic_reads_as_none(source):
    run = RunResult("old-run", "stage", stage="split", inputs=["a", "b"], outputs=["left", "right"], rows_in=4)
    from minikafka.ledger.consuming import write_run_in_current_transaction

    with source.ledger.atomic() as conn:
        write_run_in_current_transaction(conn, run.finish("succeeded"))
    assert runview.rows_by_topic(read_runs(source.ledger.conn, run_id="old-run")[0]) is None


def test_an_outputs_dedup_drops_keys_repeated_inside_one_batch_and_the_first_row_wins(source):
    ids = setup(source, rows={"items": 3})
    run = RunResult(new_run_id("split"), "stage", stage="split", consumer="split", inputs=["items"], outputs=["left"])
    commit_stage(source.ledger, run, consumer="split", inputs=[InputState("items", 3, 3, consumer_id=ids["items"])],
                 outputs=[StagedOutput(source.layout("left"), [batch((7, "first"), (8, "other"), (7, "second")),
                                                              batch((7, "third, next batch"))])])
    assert (run.rows_out, run.rows_duplicate) == (2, 2)
    left = source.topic("left", Item, dedup=("n",))
    assert [(r.n, r.text) for r in left.iter_new()] == [(7, "first"), (8, "other")]

"""A stage as plan -> run -> commit: one read of the ledger fixes the plan, the commit
settles exactly it, and the consumer is looked up once per input."""

from __future__ import annotations

import re

import pytest

from minikafka.spark import Stage, run_stage
from minikafka.spark.stages.plan import plan_stage
from tests.spark.test_stage import add, ledger, summarise  # noqa: F401 (ledger: the fixture of the stage tests)

pytestmark = pytest.mark.spark

CONSUMER_LOOKUP = re.compile(r"SELECT\s+id\s+FROM\s+_minikafka_consumers", re.IGNORECASE)


def test_the_plan_registers_the_consumer_at_its_start_and_fixes_the_bounds(ledger):  # noqa: F811
    add(ledger, [("u1", "a"), ("u2", "b c")])
    stage = Stage("summarise", ["items"], ["summaries"], transform=summarise, start="latest")
    assert plan_stage(ledger, stage, dry_run=True).consumer_ids == {"items": None}  # a dry run registers nothing
    plan = plan_stage(ledger, stage)
    assert plan.consumer_ids["items"] is not None and plan.rows_in == 0  # 'latest': past rows are not its
    add(ledger, [("u3", "d")])
    again = plan_stage(ledger, stage)
    assert again.consumer_ids == plan.consumer_ids and again.rows_in == 1 and again.watermarks == {"items": 3}
    assert set(again.inputs) == {"items"} and set(again.outputs) == {"summaries"}


def test_a_run_looks_its_consumer_up_once_per_input(spark, ledger):  # noqa: F811
    add(ledger, [("u1", "a b"), ("u2", "c")])
    statements: list[str] = []
    ledger.ledger.conn.set_trace_callback(statements.append)
    try:
        result = run_stage(spark, ledger, Stage("summarise", ["items"], ["summaries"], transform=summarise))
    finally:
        ledger.ledger.conn.set_trace_callback(None)
    assert result.status == "succeeded" and result.rows_out == 2
    assert len([s for s in statements if CONSUMER_LOOKUP.search(s)]) == 1

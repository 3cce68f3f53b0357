"""minikafka queue get / cancel."""

from __future__ import annotations

import json

from click.testing import CliRunner

from minikafka import Source
from minikafka.cli import main
from tests.api.queue_child import Task


def test_queue_get_prints_a_jobs_state_and_cancel_cancels_it(db_path):
    with Source(db_path) as src:
        q = src.queue("tasks", Task)
        job_id = q.enqueue({"n": 1}, max_attempts=2)
    runner = CliRunner()
    got = runner.invoke(main, ["queue", "get", "tasks", str(job_id), "--json", "-s", db_path])
    assert got.exit_code == 0, got.output
    info = json.loads(got.output)
    assert (info["state"], info["attempts"], info["max_attempts"]) == ("pending", 0, 2)
    got = runner.invoke(main, ["queue", "cancel", "tasks", str(job_id), "-s", db_path])
    assert got.exit_code == 0 and f"job {job_id}: cancelled" in got.output
    got = runner.invoke(main, ["queue", "get", "tasks", str(job_id), "-s", db_path])
    assert "cancelled" in got.output
    with Source(db_path) as src:
        assert src.queue("tasks", Task).claim_one("w") is None


def test_queue_get_of_an_unknown_job_or_queue_is_one_error_line(db_path):
    with Source(db_path) as src:
        src.queue("tasks", Task)
    runner = CliRunner()
    got = runner.invoke(main, ["queue", "get", "tasks", "5", "-s", db_path])
    assert got.exit_code == 1 and "queue 'tasks' has no job 5" in got.output
    got = runner.invoke(main, ["queue", "cancel", "nope", "5", "-s", db_path])
    assert got.exit_code == 1 and "no queue named 'nope'" in got.output


def test_queue_get_says_cancelled_after_the_cancels_outcome_is_pruned(db_path):
    now = [1_700_000_000.0]
    with Source(db_path) as src:
        q = src.queue("tasks", Task, clock=lambda: now[0], result_ttl=1)
        cancelled = q.enqueue({"n": 1})
        q.enqueue({"n": 2})
        assert q.cancel(cancelled)
        now[0] += 2  # past result_ttl: the next finished job prunes the kept outcomes
        assert q.claim_one("w").ack({"ok": True})
    got = CliRunner().invoke(main, ["queue", "get", "tasks", str(cancelled), "--json", "-s", db_path])
    assert got.exit_code == 0, got.output
    assert json.loads(got.output)["state"] == "cancelled"

"""minikafka schedule add | list | pause | resume | remove | tick."""

from __future__ import annotations

import json

from click.testing import CliRunner

from minikafka import Source
from minikafka.cli import main
from tests.api.queue_child import Task


def test_schedule_commands_add_list_pause_resume_tick_and_remove(db_path):
    with Source(db_path) as src:
        src.queue("tasks", Task)
    run = CliRunner().invoke
    got = run(main, ["schedule", "add", "ping", "--queue", "tasks", "--every", "0.001", "--payload", '{"n": 2}',
                     "-s", db_path])
    assert got.exit_code == 0, got.output
    got = run(main, ["schedule", "list", "--json", "-s", db_path])
    assert [(s["name"], s["every"], s["payload"]) for s in json.loads(got.output)] == [("ping", 0.001, {"n": 2})]
    assert run(main, ["schedule", "pause", "ping", "-s", db_path]).exit_code == 0
    got = run(main, ["schedule", "tick", "--json", "-s", db_path])
    assert json.loads(got.output) == []
    assert run(main, ["schedule", "resume", "ping", "-s", db_path]).exit_code == 0
    with Source(db_path) as src:  # let the period pass without sleeping on a clock: wait for the due time
        sched = src.scheduler()
        while sched.next_due_in():
            pass
    got = run(main, ["schedule", "tick", "--json", "-s", db_path])
    fired = json.loads(got.output)
    assert [f["schedule"] for f in fired] == ["ping"]
    with Source(db_path) as src:
        assert src.queue("tasks", Task).claim_one("w").data == Task(n=2)
    assert run(main, ["schedule", "remove", "ping", "-s", db_path]).exit_code == 0
    got = run(main, ["schedule", "remove", "ping", "-s", db_path])
    assert got.exit_code == 1 and "no schedule named 'ping'" in got.output


def test_schedule_add_refuses_a_bad_cron_or_payload_in_one_line(db_path):
    with Source(db_path) as src:
        src.queue("tasks", Task)
    run = CliRunner().invoke
    got = run(main, ["schedule", "add", "x", "--queue", "tasks", "--cron", "nope", "--payload", '{"n": 1}',
                     "-s", db_path])
    assert got.exit_code == 2 and "cron must be a cron expression" in got.output
    got = run(main, ["schedule", "add", "x", "--queue", "tasks", "--every", "5", "--payload", "{", "-s", db_path])
    assert got.exit_code == 2 and "--payload" in got.output


def test_schedule_tick_names_the_process_holding_the_leader_lease_and_until_when(db_path):
    with Source(db_path) as src:
        src.queue("tasks", Task).schedule("ping", every=3600, payload={"n": 1})
        other = src.scheduler(holder="other-host:4242:abcd", lease=600)
        other.tick()  # leads now, for ten minutes
        until = other.lease().expires_at
    run = CliRunner().invoke
    got = run(main, ["schedule", "tick", "-s", db_path])
    assert got.exit_code == 0, got.output
    assert "nothing due" not in got.output
    assert f"'other-host:4242:abcd' holds the scheduler lease until {until.isoformat()}" in got.output
    got = run(main, ["schedule", "tick", "--json", "-s", db_path])
    assert got.exit_code == 0 and json.loads(got.stdout) == []
    assert "other-host:4242:abcd" in got.stderr


def test_schedule_list_says_when_a_schedules_queue_was_dropped(db_path):
    with Source(db_path) as src:
        src.queue("tasks", Task).schedule("ping", every=60, payload={"n": 1})
        src.topic("tasks", Task, dedup=None).drop_consumer("tasks")
    run = CliRunner().invoke
    got = run(main, ["schedule", "list", "-s", db_path])
    assert got.exit_code == 0 and "queue dropped: fires nothing" in got.output
    got = run(main, ["schedule", "list", "--json", "-s", db_path])
    assert json.loads(got.output)[0]["queue_dropped"] is True

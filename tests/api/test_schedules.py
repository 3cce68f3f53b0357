"""Periodic jobs: cron and every schedules fired by the leader-lease holder, once per due time
across processes, with a bounded catch-up after downtime; list/pause/resume/remove."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from minikafka import ScheduleNotFoundError, Source
from tests.api.epoch_clock import EpochClock
from tests.api.queue_child import Task

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, 12, 0, 30, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def clock():
    return EpochClock(T0)


def test_an_every_schedule_fires_once_per_period_into_its_queue(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock)
    q.schedule("ping", every=60, payload={"n": 1})
    sched = file_source.scheduler(clock=clock)
    assert sched.tick() == []
    clock.now += 60
    fired = sched.tick()
    assert [f.schedule for f in fired] == ["ping"] and fired[0].due.timestamp() == T0 + 60
    assert sched.tick() == []  # the same due time never fires twice
    job = q.claim_one("w")
    assert job.data == Task(n=1) and job.id == fired[0].job_id


def test_a_cron_schedule_fires_at_its_minutes_in_utc(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock)
    info = q.schedule("five", cron="*/5 * * * *", payload={"n": 5})
    assert info.next_due == datetime(2026, 1, 1, 12, 5, tzinfo=timezone.utc)
    sched = file_source.scheduler(clock=clock)
    clock.now = datetime(2026, 1, 1, 12, 5, 0, tzinfo=timezone.utc).timestamp()
    assert [f.due.minute for f in sched.tick()] == [5]
    assert sched.get("five").next_due == datetime(2026, 1, 1, 12, 10, tzinfo=timezone.utc)


def test_after_downtime_only_the_latest_max_catch_up_missed_runs_fire(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock)
    q.schedule("one", every=60, payload={"n": 1})
    q.schedule("three", cron="* * * * *", payload={"n": 3}, max_catch_up=3)
    sched = file_source.scheduler(clock=clock)
    clock.now += 3600  # an hour down: 60 due times missed
    fired = sched.tick()
    assert [f.schedule for f in fired].count("one") == 1
    three = [f.due for f in fired if f.schedule == "three"]
    assert len(three) == 3 and three == sorted(three) and three[-1].timestamp() <= clock.now
    assert sched.tick() == []
    assert sched.get("one").next_due.timestamp() > clock.now


def test_only_the_lease_holder_fires_until_its_lease_expires(db_path, clock):
    with Source(db_path) as a, Source(db_path) as b:
        a.queue("tasks", Task, clock=clock).schedule("ping", every=10, payload={"n": 1})
        first = a.scheduler(clock=clock, holder="a", lease=30)
        second = b.scheduler(clock=clock, holder="b", lease=30)
        assert first.tick() == [] and first.is_leader()
        clock.now += 10
        assert second.tick() == []  # a holds the lease
        assert len(first.tick()) == 1
        clock.now += 31  # a stopped ticking: its lease ran out
        assert len(second.tick()) == 1 and second.is_leader() and not first.is_leader()


def test_pause_resume_remove_and_list(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock)
    q.schedule("ping", every=60, payload={"n": 1})
    sched = file_source.scheduler(clock=clock)
    sched.pause("ping")
    clock.now += 600
    assert sched.tick() == [] and sched.list()[0].paused
    sched.resume("ping")  # what was missed while paused is skipped
    assert sched.tick() == []
    clock.now += 60
    assert len(sched.tick()) == 1
    sched.remove("ping")
    assert sched.list() == []
    with pytest.raises(ScheduleNotFoundError, match="no schedule named 'ping'"):
        sched.pause("ping")


def test_bad_schedules_are_refused_with_the_value(file_source):
    q = file_source.queue("tasks", Task)
    with pytest.raises(ValueError, match="exactly one of cron="):
        q.schedule("x", payload={"n": 1})
    with pytest.raises(ValueError, match="cron must be a cron expression.*'every minute'"):
        q.schedule("x", cron="every minute", payload={"n": 1})
    with pytest.raises(ValueError, match="every must be a finite number of seconds > 0 .*got 0"):
        q.schedule("x", every=0, payload={"n": 1})
    assert file_source.scheduler().list() == []


def test_two_processes_ticking_never_fire_a_due_time_twice(db_path, tmp_path):
    with Source(db_path) as src:
        src.queue("tasks", Task).schedule("fast", every=0.05, payload={"n": 1}, max_catch_up=5)
    stop = tmp_path / "stop"
    children = [subprocess.Popen([sys.executable, "-m", "tests.api.schedule_child", db_path, str(stop)],
                                 cwd=ROOT, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    with Source(db_path) as src:
        tasks = src.topic("tasks", Task, dedup=None)
        deadline = time.monotonic() + 60
        while tasks.count() < 20 and time.monotonic() < deadline:
            src.watcher.wait(src.watcher.mark(), 0.5)
    stop.touch()
    per_child = [json.loads(c.communicate(timeout=60)[0]) for c in children]
    assert all(c.returncode == 0 for c in children)
    assert all(per_child), "both processes took the lease in turns and fired"
    fired = [tuple(f) for fs in per_child for f in fs]
    dues = [f[1] for f in fired]
    assert len(dues) >= 20 and len(dues) == len(set(dues))
    with Source(db_path) as src:
        assert src.topic("tasks", Task, dedup=None).count() == len(fired)

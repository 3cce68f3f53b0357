"""Schedules under faults and misuse: a schedule that cannot fire never stops the others, a
dropped queue is never brought back by a tick, six-field cron strings and unbounded numbers
are refused naming the argument, and an identical re-add keeps the schedule's clock."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pydantic import BaseModel

from minikafka import (
    InvalidDurationError,
    InvalidSettingError,
    QueueNotFoundError,
    ScheduleConfigError,
    Source,
)
from minikafka.api.modes.queues import find_queue
from minikafka.ledger.consuming import schedules as store
from minikafka.util.clock import format_timestamp
from tests.api.epoch_clock import EpochClock
from tests.api.queue_child import Task
from tests.api.schedule_child import Keyed

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, 12, 0, 30, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def clock():
    return EpochClock(T0)


def store_legacy_schedule(src: Source, name: str, topic: str, consumer: str, payload: str, every_ms: int,
                          next_due_ms: int) -> None:
    """A schedule as a ledger written before schedules on dedup-keyed queues were refused holds it."""
    with src.ledger.atomic() as conn:
        store.save_in_current_transaction(conn, {
            "name": name, "topic": topic, "consumer": consumer, "cron": None, "every_ms": every_ms,
            "payload": payload, "priority": 0, "max_catch_up": 1, "paused": 0, "next_due": next_due_ms,
            "last_fired": None, "created_at": format_timestamp(datetime.now(timezone.utc))})


# -- cause 1: one bad schedule stopped every schedule ------------------------------------
def test_a_schedule_on_a_dedup_keyed_queue_is_refused_when_added(file_source):
    q = file_source.topic("jobs", Keyed, dedup=("kind",)).queue("w")
    with pytest.raises(ScheduleConfigError, match=r"schedule 'const'.*dedup fields \('kind',\).*duplicate"):
        q.schedule("const", every=1, payload={"kind": "k"})
    with pytest.raises(ValueError):  # still a ValueError, as bad arguments were
        q.schedule("const", every=1, payload={"kind": "k"})
    assert file_source.scheduler().list() == []


def test_a_duplicate_fire_is_skipped_and_recorded_and_the_other_schedules_keep_firing(file_source, clock):
    file_source.topic("jobs", Keyed, dedup=("kind",)).queue("w", clock=clock)
    tasks = file_source.queue("tasks", Task, clock=clock)
    tasks.schedule("ping", every=60, payload={"n": 1})
    store_legacy_schedule(file_source, "const", "jobs", "w", '{"kind": "k"}', 60_000, int((T0 + 60) * 1000))
    sched = file_source.scheduler(clock=clock)
    clock.now += 60
    assert sorted(f.schedule for f in sched.tick()) == ["const", "ping"]  # the first fire is no duplicate
    for _ in range(3):
        clock.now += 60
        assert [f.schedule for f in sched.tick()] == ["ping"]  # 'const' repeats its key: skipped, not fatal
        assert [(s.schedule, s.due.timestamp()) for s in sched.skipped] == [("const", clock.now)]
    info = sched.get("const")
    assert "duplicate" in info.last_error and info.skipped == 3
    assert info.next_due.timestamp() == clock.now + 60  # its clock moved on
    assert [f[1] for f in store.fires(file_source.ledger.conn, "const")][:3] == [None, None, None]
    assert tasks.stats()["pending"] == 4


def test_a_schedule_whose_model_cannot_be_imported_is_skipped_and_the_others_fire(db_path, clock):
    class Local(BaseModel):  # defined in a function: another process cannot import it
        n: int

    with Source(db_path) as src:
        src.queue("local", Local, clock=clock).schedule("a-local", every=60, payload={"n": 1})
        src.queue("tasks", Task, clock=clock).schedule("b-ping", every=60, payload={"n": 1})
    with Source(db_path) as other:  # the scheduling process, which only has the catalog
        sched = other.scheduler(clock=clock)
        clock.now += 60
        assert [f.schedule for f in sched.tick()] == ["b-ping"]
        assert [s.schedule for s in sched.skipped] == ["a-local"]
        assert "cannot be imported" in sched.get("a-local").last_error


class TaskV2(BaseModel):
    n: int
    label: str  # new and required: a payload stored before the migration no longer fits


def test_a_schedule_whose_payload_no_longer_fits_after_a_migration_is_skipped_naming_the_field(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock)
    q.schedule("old", every=60, payload={"n": 1})
    file_source.queue("other", Task, clock=clock).schedule("ping", every=60, payload={"n": 2})
    file_source.topic("tasks", Task, dedup=None).migrate(TaskV2, lambda t: {"n": t.n, "label": "x"})
    sched = file_source.scheduler(clock=clock)
    clock.now += 60
    assert [f.schedule for f in sched.tick()] == ["ping"]
    assert sched.skipped[0].error == ("ValidationError: the payload no longer fits the queue's model: "
                                      "label: Field required")


def test_schedule_run_survives_a_schedule_that_cannot_fire(db_path):
    with Source(db_path) as src:
        src.topic("jobs", Keyed, dedup=("kind",)).queue("w")
        src.queue("tasks", Task).schedule("ping", every=0.05, payload={"n": 1})
        store_legacy_schedule(src, "const", "jobs", "w", '{"kind": "k"}', 50, int(time.time() * 1000))
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "schedule", "run", "-s", db_path], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with Source(db_path) as src:
            tasks = src.topic("tasks", Task, dedup=None)
            deadline = time.monotonic() + 60
            while (tasks.count() < 5 or not src.scheduler().get("const").skipped) and time.monotonic() < deadline:
                src.watcher.wait(src.watcher.mark(), 0.5)
                assert proc.poll() is None, proc.communicate()
            assert tasks.count() >= 5
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "const: skipped due" in out and "duplicate" in out
    assert "skipped" not in err  # said once, on stdout (not again by Python's last-resort log handler)
    assert "ping: due" in out
    assert out.splitlines()[-1].startswith("schedule run: fired ")  # the summary


# -- cause 2: the scheduler brought a dropped queue back with its history -------------------
def test_a_tick_never_brings_back_a_dropped_queue_with_its_history(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock)
    for n in range(3):
        q.enqueue({"n": n})
    for job in q.claim_batch("w", 3):
        job.ack()
    q.schedule("ping", every=60, payload={"n": 9})
    file_source.topic("tasks", Task, dedup=None).drop_consumer("tasks")
    sched = file_source.scheduler(clock=clock)
    clock.now += 60
    assert sched.tick() == []
    with pytest.raises(QueueNotFoundError):
        find_queue(file_source, "tasks")  # not re-registered: its three done jobs stay done
    assert "tasks" not in file_source.topic("tasks", Task, dedup=None).consumers()
    info = sched.get("ping")
    assert info.queue_dropped and [s.queue_dropped for s in sched.list()] == [True]
    assert sched.next_due_in() is None  # nothing to wait for: `schedule run` does not spin on it


def test_schedule_run_never_brings_back_a_queue_another_process_dropped(db_path):
    with Source(db_path) as src:
        q = src.queue("tasks", Task)
        for n in range(3):
            q.enqueue({"n": n})
        for job in q.claim_batch("w", 3):
            job.ack()
        q.schedule("ping", every=0.05, payload={"n": 9})
        src.queue("other", Task).schedule("pong", every=0.05, payload={"n": 1})
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "schedule", "run", "-s", db_path], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with Source(db_path) as src:
            tasks = src.topic("tasks", Task, dedup=None)
            other = src.topic("other", Task, dedup=None)

            def wait_for(check):
                deadline = time.monotonic() + 60
                while not check() and time.monotonic() < deadline:
                    src.watcher.wait(src.watcher.mark(), 0.5)
                    assert proc.poll() is None, proc.communicate()
                assert check()

            wait_for(lambda: tasks.count() >= 5)  # 'ping' fires into the queue
            tasks.drop_consumer("tasks")
            seen = other.count()
            wait_for(lambda: other.count() >= seen + 5)  # the scheduler ticked on, well past the drop
            with pytest.raises(QueueNotFoundError):
                find_queue(src, "tasks")
            assert "tasks" not in tasks.consumers()
            assert src.scheduler().get("ping").queue_dropped
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err


def test_a_schedule_is_refused_on_a_dropped_queue(file_source):
    q = file_source.queue("tasks", Task)
    file_source.topic("tasks", Task, dedup=None).drop_consumer("tasks")
    with pytest.raises(QueueNotFoundError, match="queue 'tasks' was dropped"):
        q.schedule("ping", every=60, payload={"n": 1})


# -- mediocre findings ----------------------------------------------------------------------
def test_a_six_field_cron_is_refused_as_only_five_fields_are_documented(file_source):
    q = file_source.queue("tasks", Task)
    with pytest.raises(ScheduleConfigError, match=r"five fields.*got 6 fields: '0 0 3 \* \* \*'"):
        q.schedule("quartz", cron="0 0 3 * * *", payload={"n": 1})
    with pytest.raises(ValueError, match="five fields"):
        q.schedule("quartz", cron="* * * *", payload={"n": 1})
    assert file_source.scheduler().list() == []


def test_re_adding_an_identical_schedule_keeps_its_clock(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock)
    first = q.schedule("ping", every=60, payload={"n": 1})
    sched = file_source.scheduler(clock=clock)
    clock.now += 30  # a provisioning script re-adds it more often than its period
    assert q.schedule("ping", every=60, payload={"n": 1}).next_due == first.next_due
    clock.now += 30
    assert [f.schedule for f in sched.tick()] == ["ping"]
    changed = q.schedule("ping", every=120, payload={"n": 1})  # another definition replaces it
    assert changed.every == 120 and changed.next_due.timestamp() == clock.now + 120


@pytest.mark.parametrize("every", [float("inf"), float("nan"), 1e300, -1, 0, True])
def test_an_unbounded_every_is_refused_naming_it(file_source, every):
    q = file_source.queue("tasks", Task)
    with pytest.raises(InvalidDurationError, match=r"^every must be a finite number of seconds > 0"):
        q.schedule("x", every=every, payload={"n": 1})
    assert file_source.scheduler().list() == []


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"max_catch_up": 2**63}, r"^max_catch_up must be an integer from 1 to 1000, got 9223372036854775808"),
    ({"max_catch_up": 0}, r"^max_catch_up must be an integer from 1 to 1000, got 0"),
    ({"priority": 2**63}, r"^priority must be a 64-bit integer, got 9223372036854775808"),
    ({"priority": "high"}, r"^priority must be a 64-bit integer, got 'high'"),
])
def test_unbounded_schedule_integers_are_refused_naming_them(file_source, kwargs, match):
    q = file_source.queue("tasks", Task)
    with pytest.raises(InvalidSettingError, match=match):
        q.schedule("x", every=60, payload={"n": 1}, **kwargs)
    assert file_source.scheduler().list() == []


@pytest.mark.parametrize("lease", [float("inf"), float("nan"), 1e300, 0])
def test_an_unbounded_scheduler_lease_is_refused_naming_it(file_source, lease):
    with pytest.raises(InvalidDurationError, match=r"^lease must be a finite number of seconds > 0"):
        file_source.scheduler(lease=lease)


def test_a_schedule_fires_again_once_its_dropped_queue_is_opened_again(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock)
    q.schedule("ping", every=60, payload={"n": 1})
    file_source.topic("tasks", Task, dedup=None).drop_consumer("tasks")
    sched = file_source.scheduler(clock=clock)
    clock.now += 60
    assert sched.tick() == []
    file_source.queue("tasks", Task, clock=clock)  # the user's own choice: the queue exists again
    assert not sched.get("ping").queue_dropped
    assert [f.schedule for f in sched.tick()] == ["ping"]

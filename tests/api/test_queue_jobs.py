"""One job of a queue: get, cancel (also against a running worker), per-job max_attempts and
expires, and results (stored with the ack, waited for across processes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from minikafka import InvalidRecordError, JobCancelledError, JobFailedError, JobNotFoundError, Source
from tests.api.epoch_clock import EpochClock
from tests.api.queue_child import Task

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clock():
    return EpochClock(1_000_000.0)


@pytest.fixture
def q(file_source, clock):
    return file_source.queue("tasks", Task, visibility_timeout=30, max_attempts=3, clock=clock)


def test_get_reports_state_attempts_run_at_and_last_error(q, clock):
    job_id = q.enqueue({"n": 1}, delay=10)
    info = q.get(job_id)
    assert (info.state, info.attempts, info.max_attempts) == ("pending", 0, 3)
    assert info.run_at.timestamp() == clock.now + 10
    clock.now += 10
    job = q.claim_one("w1")
    assert q.get(job_id).state == "processing" and q.get(job_id).worker_id == "w1"
    job.retry(delay=5, error="boom")
    info = q.get(job_id)
    assert (info.state, info.attempts, info.last_error) == ("pending", 1, "boom")
    assert q.get(999) is None


def test_cancel_of_a_pending_job_means_it_is_never_claimed(q):
    job_id = q.enqueue({"n": 1})
    assert q.cancel(job_id) is True
    assert q.claim_one("w1") is None
    assert q.get(job_id).state == "cancelled"
    assert q.cancel(job_id) is False
    assert q.stats()["pending"] == 0


def test_cancel_racing_a_running_worker_refuses_its_later_ack_and_the_job_never_runs_again(db_path, clock):
    with Source(db_path) as worker_side, Source(db_path) as admin_side:
        worker_q = worker_side.queue("tasks", Task, visibility_timeout=30, clock=clock)
        admin_q = admin_side.queue("tasks", Task, clock=clock)
        job_id = worker_q.enqueue({"n": 7})
        job = worker_q.claim_one("w1")
        assert admin_q.get(job_id).state == "processing"
        assert admin_q.cancel(job_id) is True
        assert job.heartbeat() is False
        assert job.ack({"late": True}) is False
        clock.now += 3600  # long past the lease: still nothing to claim
        assert worker_q.claim_one("w2") is None
        assert admin_q.get(job_id).state == "cancelled"
        with pytest.raises(JobCancelledError, match=f"job {job_id} of queue 'tasks' was cancelled"):
            admin_q.result(job_id, timeout=0)


def test_cancel_reaches_a_row_appended_to_the_topic_by_other_means(file_source, q):
    row = file_source.topic("tasks", Task, dedup=None).append({"n": 3})
    assert q.cancel(row.offset.id) is True
    assert q.claim_one("w1") is None


def test_per_job_max_attempts_overrides_the_queues(q):
    job_id = q.enqueue({"n": 1}, max_attempts=1)
    job = q.claim_one("w1")
    assert job.max_attempts == 1
    job.retry(delay=0, error="first and last")
    assert q.get(job_id).state == "dead"
    assert q.dead()[0]["last_error"] == "first and last"


def test_an_expired_job_goes_to_the_dead_letter_as_expired_instead_of_running(q, clock):
    stale = q.enqueue({"n": 1}, expires=5)
    fresh = q.enqueue({"n": 2}, expires=60)
    clock.now += 10
    job = q.claim_one("w1")
    assert job.id == fresh
    assert q.get(stale).state == "dead" and q.get(stale).last_error == "expired"
    assert [d["id"] for d in q.dead()] == [stale]
    with pytest.raises(JobFailedError, match="expired"):
        q.result(stale, timeout=0)


def test_bad_per_job_options_are_refused_before_anything_is_enqueued(q):
    with pytest.raises(ValueError, match="max_attempts must be an integer from 1 to 2147483647, got 0"):
        q.enqueue({"n": 1}, max_attempts=0)
    with pytest.raises(ValueError, match="expires must be a finite number of seconds >= 0 or a datetime .*got -1"):
        q.enqueue({"n": 1}, expires=-1)
    assert q.topic.count() == 0


def test_ack_stores_the_result_for_get_and_result(q):
    job_id = q.enqueue({"n": 4})
    q.claim_one("w1").ack({"square": 16})
    assert q.get(job_id).result == {"square": 16} and q.get(job_id).state == "done"
    assert q.result(job_id, timeout=0) == {"square": 16}


def test_a_result_json_cannot_hold_is_refused_and_the_job_stays_claimed(q):
    job_id = q.enqueue({"n": 4})
    job = q.claim_one("w1")
    with pytest.raises(InvalidRecordError, match=f"result of job {job_id} of queue 'tasks'.*NaN"):
        job.ack({"x": float("nan")})
    assert q.get(job_id).state == "processing"
    assert job.ack(None) is True
    assert q.result(job_id, timeout=0) is None


def test_results_are_pruned_after_result_ttl(db_path, clock):
    with Source(db_path) as src:
        q = src.queue("tasks", Task, clock=clock, result_ttl=60)
        old = q.enqueue({"n": 1})
        q.claim_one("w").ack({"v": 1})
        clock.now += 61
        new = q.enqueue({"n": 2})
        q.claim_one("w").ack({"v": 2})  # pruning runs with each stored result
        assert q.get(old).result is None and q.get(old).state == "done"
        assert q.get(new).result == {"v": 2}


def test_result_times_out_and_names_an_unknown_job(q):
    job_id = q.enqueue({"n": 1})
    with pytest.raises(TimeoutError, match=f"job {job_id} of queue 'tasks' did not finish within 0.05 s"):
        q.result(job_id, timeout=0.05)
    with pytest.raises(JobNotFoundError, match="queue 'tasks' has no job 99"):
        q.result(99, timeout=0)


def test_result_waits_for_a_worker_in_another_process(db_path):
    with Source(db_path) as src:
        q = src.queue("tasks", Task)
        job_id = q.enqueue({"n": 9})
        child = subprocess.Popen([sys.executable, "-m", "tests.api.queue_child", db_path], cwd=ROOT)
        try:
            assert q.result(job_id, timeout=60) == {"square": 81, "worker": "child"}
        finally:
            assert child.wait(timeout=60) == 0

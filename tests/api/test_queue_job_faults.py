"""Jobs under faults and misuse: a cancelled job stays cancelled after its outcome is pruned, a
rolled-back ``tx=`` finish leaves the job to its holder, stats count cancelled jobs apart,
a requeued expired job runs, and unbounded times are refused naming the argument."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from minikafka import (
    InvalidDurationError,
    InvalidSettingError,
    JobCancelledError,
    JobNotOursError,
    Source,
)
from tests.api.epoch_clock import EpochClock
from tests.api.queue_child import Task

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def clock():
    return EpochClock(T0)


# -- cause 3: a cancelled job later read `done` -------------------------------------------
def test_a_cancelled_job_still_reads_cancelled_after_its_outcome_is_pruned(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock, result_ttl=1)
    cancelled = q.enqueue({"n": 1})
    later = q.enqueue({"n": 2})
    assert q.cancel(cancelled)
    clock.now += 2  # past result_ttl: the next finished job prunes the kept outcomes
    job = q.claim_one("w")
    assert job.id == later and job.ack({"ok": True})
    assert q.get(cancelled).state == "cancelled"
    with pytest.raises(JobCancelledError, match=f"job {cancelled} of queue 'tasks' was cancelled"):
        q.result(cancelled, timeout=0)
    with Source(file_source.path) as other:  # another reader, as another process
        assert other.queue("tasks", Task).get(cancelled).state == "cancelled"


def test_stats_count_cancelled_jobs_apart_from_done(file_source):
    q = file_source.queue("tasks", Task)
    ids = [q.enqueue({"n": n}) for n in range(3)]
    assert q.cancel(ids[0])
    q.claim_one("w").ack()
    assert q.stats() == {"pending": 1, "processing": 0, "dead": 0, "done": 1, "cancelled": 1}


# -- cause 6: a rolled-back job.ack(tx=) locked the holder out -----------------------------
class Boom(Exception):
    pass


@pytest.mark.parametrize("how", ["ack", "retry", "fail", "ack_batch"])
def test_a_rolled_back_tx_finish_leaves_the_job_to_its_holder(file_source, how):
    q = file_source.queue("tasks", Task)
    q.enqueue({"n": 1})
    job = q.claim_one("w")
    with pytest.raises(Boom):
        with file_source.transaction() as tx:
            if how == "ack_batch":
                assert q.ack_batch([job], tx=tx) == 1
            else:
                assert getattr(job, how)(**({"error": "x"} if how == "fail" else {}), tx=tx)
            raise Boom  # the business write failed: everything of the transaction rolls back
    assert q.get(job.id).state == "processing"
    assert job.heartbeat(30)  # still the holder's
    assert job.retry(0, error="again")
    assert q.get(job.id).state == "pending"


def test_a_committed_tx_ack_still_finishes_the_job_once(file_source):
    q = file_source.queue("tasks", Task)
    q.enqueue({"n": 1})
    job = q.claim_one("w")
    with file_source.transaction() as tx:
        assert job.ack(tx=tx)
    assert q.get(job.id).state == "done"
    with pytest.raises(JobNotOursError, match="already acked"):
        job.ack()


def test_a_rolled_back_savepoint_inside_a_committed_transaction_leaves_the_job_to_its_holder(file_source):
    q = file_source.queue("tasks", Task)
    q.enqueue({"n": 1})
    job = q.claim_one("w")
    with file_source.transaction() as tx:
        with pytest.raises(Boom):
            with file_source.ledger.atomic():  # a savepoint, as a library call joining tx makes
                assert job.ack(tx=tx)
                raise Boom
    assert q.get(job.id).state == "processing"
    assert job.ack()


# -- mediocre findings ----------------------------------------------------------------------
def test_requeue_of_an_expired_job_lets_the_next_claim_run_it(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock)
    job_id = q.enqueue({"n": 1}, expires=10)
    clock.now += 11
    assert q.claim_one("w") is None
    assert [d["last_error"] for d in q.dead()] == ["expired"]
    assert q.requeue([job_id]) == 1
    job = q.claim_one("w")
    assert job is not None and job.id == job_id
    assert q.get(job_id).expires_at is None


def test_a_requeued_job_keeps_an_expiry_still_ahead(file_source, clock):
    q = file_source.queue("tasks", Task, clock=clock, max_attempts=1)
    job_id = q.enqueue({"n": 1}, expires=3600)
    assert q.claim_one("w").fail("boom")
    assert q.requeue() == 1
    assert q.get(job_id).expires_at.timestamp() == T0 + 3600


def test_result_refuses_a_negative_timeout_as_wait_does(file_source):
    q = file_source.queue("tasks", Task)
    job_id = q.enqueue({"n": 1})
    with pytest.raises(InvalidDurationError, match=r"^wait timeout must be a finite number of seconds >= 0"):
        q.wait(-1)
    for bad in (-1, float("nan"), float("inf"), "1"):
        with pytest.raises(InvalidDurationError, match=r"^result timeout must be a finite number of seconds >= 0"):
            q.result(job_id, timeout=bad)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"delay": float("inf")}, InvalidDurationError, "^delay must be a finite number of seconds >= 0"),
    ({"delay": 1e300}, InvalidDurationError, "^delay must be"),
    ({"delay": float("nan")}, InvalidDurationError, "^delay must be"),
    ({"delay": -1}, InvalidDurationError, "^delay must be"),
    ({"expires": float("inf")}, InvalidDurationError, "^expires must be a finite number of seconds >= 0"),
    ({"expires": 1e300}, InvalidDurationError, "^expires must be"),
    ({"expires": -1}, InvalidDurationError, "^expires must be"),
    ({"run_at": -1e300}, InvalidSettingError, "^run_at must be a datetime or finite epoch seconds"),
    ({"run_at": float("nan")}, InvalidSettingError, "^run_at must be a datetime or finite epoch seconds"),
    ({"run_at": float("inf")}, InvalidSettingError, "^run_at must be"),
    ({"run_at": "tomorrow"}, InvalidSettingError, "^run_at must be"),
])
def test_unbounded_job_times_are_refused_naming_the_argument(file_source, kwargs, error, match):
    q = file_source.queue("tasks", Task)
    with pytest.raises(error, match=match):
        q.enqueue({"n": 1}, **kwargs)
    with pytest.raises(ValueError):  # still ValueErrors, as before
        q.enqueue({"n": 1}, **kwargs)
    assert q.stats()["pending"] == 0


def test_unbounded_retry_delay_and_heartbeat_are_refused_naming_them(file_source):
    q = file_source.queue("tasks", Task)
    q.enqueue({"n": 1})
    job = q.claim_one("w")
    with pytest.raises(InvalidDurationError, match="^delay must be"):
        job.retry(float("inf"))
    with pytest.raises(InvalidDurationError, match="^extend must be"):
        job.heartbeat(1e300)
    assert job.ack()

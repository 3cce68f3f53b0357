"""Work queues: claims, leases, retries, the dead letter (honker's properties, on our topics)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import BaseModel, ValidationError

from minikafka import Source
from minikafka.api.modes.queues import Job, find_queue
from minikafka.errors import JobNotOursError, QueueNotFoundError, TransactionError


class Item(BaseModel):
    url: str
    n: int = 0


class FakeClock:
    """Epoch seconds that move only when told to."""

    def __init__(self, start: float = 1_800_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def q(file_source, clock):
    return file_source.queue("jobs", Item, visibility_timeout=10, max_attempts=3, clock=clock)


def test_enqueue_returns_the_row_id_and_the_row_stays_in_the_topic(q):
    first = q.enqueue({"url": "a"})
    second = q.enqueue(Item(url="b"))
    assert (first, second) == (1, 2)
    assert [r.data.url for r in q.topic.read_since(0)] == ["a", "b"]
    assert q.stats() == {"pending": 2, "processing": 0, "dead": 0, "done": 0, "cancelled": 0}


def test_claimed_job_carries_its_data_attempts_worker_and_lease(q, clock):
    q.enqueue({"url": "a", "n": 7})
    job = q.claim_one("w1")
    assert job.id == 1 and job.data == Item(url="a", n=7)
    assert job.attempts == 1 and job.worker_id == "w1"
    assert job.lease_expires_at == datetime.fromtimestamp(clock.now + 10, tz=timezone.utc)
    assert q.claim_one("w2") is None
    assert q.stats()["processing"] == 1


def test_acked_job_is_done_and_stays_in_the_topic_as_history(q):
    q.enqueue({"url": "a"})
    job = q.claim_one("w1")
    assert job.ack() is True
    assert q.stats() == {"pending": 0, "processing": 0, "dead": 0, "done": 1, "cancelled": 0}
    assert q.topic.count() == 1
    assert [r.id for r in q.topic.iter_handled(records=True, consumer="jobs")] == [1]
    assert q.claim_one("w1") is None


def test_eight_threads_claiming_one_job_have_exactly_one_winner(db_path):
    with Source(db_path) as source:
        source.queue("jobs", Item).enqueue({"url": "only"})
    barrier = threading.Barrier(8)
    won: list[int] = []

    def worker(i: int) -> None:
        with Source(db_path) as mine:
            queue = mine.queue("jobs", Item)
            barrier.wait()
            jobs = queue.claim_batch(f"w{i}", 5)
            won.extend(j.id for j in jobs)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert won == [1]


def test_expired_lease_is_reclaimed_with_attempt_two_and_the_stale_ack_returns_false(q, clock):
    q.enqueue({"url": "a"})
    stale = q.claim_one("slow")
    clock.advance(10)  # the lease ends exactly now
    fresh = q.claim_one("fast")
    assert fresh is not None and fresh.id == stale.id
    assert fresh.attempts == 2 and fresh.worker_id == "fast"
    assert stale.ack() is False
    assert stale.retry(delay=0) is False and stale.fail("late") is False
    assert q.stats()["processing"] == 1
    assert fresh.ack() is True
    assert q.stats()["done"] == 1


def test_a_stale_worker_with_the_same_worker_id_cannot_ack_the_new_claim(q, clock):
    q.enqueue({"url": "a"})
    stale = q.claim_one("w")
    clock.advance(11)
    fresh = q.claim_one("w")
    assert stale.ack() is False
    assert fresh.ack() is True


def test_heartbeat_extends_a_valid_lease(q, clock):
    q.enqueue({"url": "a"})
    job = q.claim_one("w1")
    clock.advance(8)
    assert job.heartbeat(30) is True
    assert job.lease_expires_at == datetime.fromtimestamp(clock.now + 30, tz=timezone.utc)
    clock.advance(20)
    assert q.claim_one("w2") is None
    assert job.ack() is True


def test_heartbeat_never_steals_back_an_expired_lease(q, clock):
    q.enqueue({"url": "a"})
    first = q.claim_one("w1")
    clock.advance(10)
    assert first.heartbeat() is False  # expired, even before anyone reclaimed it
    second = q.claim_one("w2")
    assert first.heartbeat(100) is False
    assert second.heartbeat() is True
    assert second.worker_id == "w2" and second.ack() is True


def test_max_attempts_lead_to_the_dead_letter_with_the_last_error(q, clock):
    q.enqueue({"url": "a"})
    for attempt in (1, 2):
        job = q.claim_one("w")
        assert job.attempts == attempt
        assert job.retry(delay=5, error=f"boom {attempt}") is True
        assert q.claim_one("w") is None  # not due yet
        clock.advance(5)
    job = q.claim_one("w")
    assert job.attempts == 3
    assert job.retry(delay=5, error="boom 3") is True
    clock.advance(5)
    assert q.claim_one("w") is None
    dead = q.dead()
    assert [(d["id"], d["attempts"], d["last_error"]) for d in dead] == [(1, 3, "boom 3")]
    assert dead[0]["data"] == Item(url="a")
    assert q.stats() == {"pending": 0, "processing": 0, "dead": 1, "done": 0, "cancelled": 0}
    quarantined = q.source.quarantined("jobs")
    assert quarantined[0]["reason"] == "boom 3" and quarantined[0]["origin"] == "queue"
    assert quarantined[0]["consumer"] == "jobs" and quarantined[0]["row_id"] == 1


def test_an_expired_last_attempt_goes_to_the_dead_letter_on_the_next_claim(q, clock):
    q.enqueue({"url": "a"})
    for _ in range(3):
        assert q.claim_one("crashy") is not None
        clock.advance(10)
    assert q.claim_one("w") is None
    assert q.dead()[0]["last_error"] == "max attempts exceeded"


def test_a_valid_last_attempt_is_not_dead_lettered_while_in_flight(q, clock):
    q.enqueue({"url": "a"})
    for _ in range(2):
        q.claim_one("crashy")
        clock.advance(10)
    last = q.claim_one("w")
    assert last.attempts == 3
    q.claim_batch("other", 5)
    assert q.dead() == []
    assert last.ack() is True


def test_fail_sends_the_job_to_the_dead_letter_at_once(q):
    q.enqueue({"url": "a"})
    job = q.claim_one("w")
    assert job.fail("bad input") is True
    assert [(d["attempts"], d["last_error"]) for d in q.dead()] == [(1, "bad input")]


def test_requeue_puts_dead_jobs_back_with_fresh_attempts(q):
    for url in ("a", "b"):
        q.enqueue({"url": url})
    for job in q.claim_batch("w", 2):
        job.fail("nope")
    assert q.requeue([1]) == 1
    assert [d["id"] for d in q.dead()] == [2]
    job = q.claim_one("w")
    assert job.id == 1 and job.attempts == 1
    assert q.requeue() == 1
    assert q.dead() == [] and q.source.quarantined("jobs") == []
    assert q.stats()["pending"] == 1


def test_higher_priority_is_claimed_first_then_older_rows(q):
    for url, priority in (("low-old", 0), ("high", 5), ("low-new", 0), ("mid", 1)):
        q.enqueue({"url": url}, priority=priority)
    assert [j.data.url for j in q.claim_batch("w", 10)] == ["high", "mid", "low-old", "low-new"]


def test_delayed_jobs_wait_until_due_and_delay_wins_over_run_at(q, clock):
    q.enqueue({"url": "later"}, delay=30)
    q.enqueue({"url": "at"}, run_at=clock.now + 10)
    q.enqueue({"url": "both"}, delay=60, run_at=clock.now)
    q.enqueue({"url": "datetime"}, run_at=datetime.fromtimestamp(clock.now + 20, tz=timezone.utc))
    assert q.claim_one("w") is None
    assert q.next_due_in() == pytest.approx(10)
    def claim_and_ack():
        jobs = q.claim_batch("w", 10)
        assert q.ack_batch(jobs) == len(jobs)
        return [j.data.url for j in jobs]

    clock.advance(10)
    assert claim_and_ack() == ["at"]
    clock.advance(20)
    assert claim_and_ack() == ["datetime", "later"]  # both due: the earlier due time first
    clock.advance(30)
    assert claim_and_ack() == ["both"]


def test_retry_delay_is_counted_from_the_retry(q, clock):
    q.enqueue({"url": "a"})
    q.claim_one("w").retry(delay=2.5)
    clock.advance(2.499)
    assert q.claim_one("w") is None
    clock.advance(0.001)
    assert q.claim_one("w").attempts == 2


def test_rows_appended_to_the_topic_directly_become_jobs(file_source, clock):
    topic = file_source.topic("feed", Item, dedup=None)
    topic.append({"url": "before"})
    q = topic.queue("summariser", visibility_timeout=5, clock=clock)
    topic.append({"url": "after"})
    assert q.stats()["pending"] == 2
    assert [j.data.url for j in q.claim_batch("w", 5)] == ["before", "after"]


def test_two_queues_on_one_topic_each_see_every_row(file_source, clock):
    topic = file_source.topic("feed", Item, dedup=None)
    a = topic.queue("a", clock=clock)
    b = topic.queue("b", clock=clock)
    a.enqueue({"url": "x"})
    job_a = a.claim_one("w")
    job_a.ack()
    assert topic.count("new") == 1  # b has not done it yet
    job_b = b.claim_one("w")
    assert job_b.id == job_a.id and job_b.ack()
    assert topic.count("handled") == 1
    assert a.stats()["done"] == 1 and b.stats()["done"] == 1


def test_ack_batch_acks_only_claims_that_are_still_ours(q, clock):
    for i in range(4):
        q.enqueue({"url": f"u{i}"})
    early = q.claim_batch("w1", 2)
    clock.advance(10)
    late = q.claim_batch("w2", 4)
    assert q.ack_batch(early) == 0
    assert q.ack_batch(late) == 4
    assert q.stats()["done"] == 4


def test_claim_iterator_yields_jobs_then_waits_for_the_next_due_time(file_source):
    q = file_source.queue("jobs", Item)  # the real clock: the iterator sleeps until "soon" is due
    real = []
    q.enqueue({"url": "now"})
    q.enqueue({"url": "soon"}, delay=0.05)
    for job in q.claim("w", idle_poll=5.0):
        real.append(job.data.url)
        job.ack()
        if len(real) == 2:
            break
    assert real == ["now", "soon"]


def test_job_finished_twice_or_claimed_elsewhere_raises_a_clear_error(q, file_source, clock):
    q.enqueue({"url": "a"})
    job = q.claim_one("w")
    assert job.ack()
    with pytest.raises(JobNotOursError, match="already acked"):
        job.ack()
    loose = Job(id=1, data=Item(url="a"), attempts=1, worker_id="w", lease_expires_at=datetime.now(timezone.utc))
    with pytest.raises(JobNotOursError, match="not claimed through a queue"):
        loose.ack()
    other = file_source.queue("other", Item, clock=clock)
    other.enqueue({"url": "b"})
    foreign = other.claim_one("w")
    with pytest.raises(JobNotOursError, match="another queue"):
        q.ack_batch([foreign])


def test_invalid_payload_or_negative_delay_enqueues_nothing(q):
    with pytest.raises(ValidationError):
        q.enqueue({"n": 1})
    with pytest.raises(ValueError, match="delay must be a finite number of seconds >= 0"):
        q.enqueue({"url": "a"}, delay=-1)
    with pytest.raises(ValueError, match="priority"):
        q.enqueue({"url": "a"}, priority="high")
    assert q.topic.count() == 0 and q.stats()["pending"] == 0


def test_unknown_queue_name_is_a_clear_error(q):
    assert find_queue(q.source, "jobs") == ("jobs", "jobs")
    with pytest.raises(QueueNotFoundError, match="no queue named 'nope'.*jobs"):
        find_queue(q.source, "nope")


def test_bad_settings_are_refused(file_source):
    with pytest.raises(ValueError, match="visibility_timeout"):
        file_source.queue("jobs", Item, visibility_timeout=0)
    with pytest.raises(ValueError, match="max_attempts"):
        file_source.queue("jobs", Item, max_attempts=0)


def test_enqueue_in_a_transaction_commits_with_the_business_row(q):
    with q.source.transaction() as tx:
        tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
        tx.execute("INSERT INTO orders (total) VALUES (?)", (42,))
        job_id = q.enqueue({"url": "order-1"}, tx=tx)
    assert q.claim_one("w").id == job_id
    assert q.source.transaction  # still usable
    with q.source.transaction() as tx:
        assert tx.query("SELECT total FROM orders") == [{"total": 42}]


def test_ack_in_a_transaction_rolls_back_with_it(q):
    q.enqueue({"url": "a"})
    job = q.claim_one("w")
    with pytest.raises(RuntimeError):
        with q.source.transaction() as tx:
            job.ack(tx=tx)
            raise RuntimeError("business write failed")
    assert q.stats()["processing"] == 1 and q.stats()["done"] == 0


def test_enqueue_with_a_closed_transaction_is_refused(q):
    with q.source.transaction() as tx:
        pass
    with pytest.raises(TransactionError, match="closed"):
        q.enqueue({"url": "a"}, tx=tx)
    assert q.topic.count() == 0


def test_times_have_millisecond_resolution(q, clock):
    q.enqueue({"url": "a"}, delay=0.002)
    clock.advance(0.001)
    assert q.claim_one("w") is None
    clock.advance(0.001)
    job = q.claim_one("w")
    assert job is not None
    assert job.lease_expires_at - datetime.fromtimestamp(clock.now, tz=timezone.utc) == timedelta(seconds=10)


def test_lowering_max_attempts_sends_exhausted_pending_jobs_to_the_dead_letter(file_source, clock):
    q = file_source.queue("jobs", Item, max_attempts=5, clock=clock)
    q.enqueue({"url": "a"})
    for _ in range(2):
        q.claim_one("w").retry(delay=0, error="flaky")
    strict = file_source.queue("jobs", Item, max_attempts=2, clock=clock)
    assert strict.claim_one("w") is None
    assert [(d["attempts"], d["last_error"]) for d in strict.dead()] == [(2, "flaky")]


def test_the_generic_quarantine_requeue_revives_a_dead_job_instead_of_appending_a_copy(q):
    from minikafka.api.core.requeue import requeue

    q.enqueue({"url": "a"})
    q.claim_one("w").fail("bad")
    result = requeue(q.topic)
    assert result.replayed == 1 and result.appended == 0
    assert q.topic.count() == 1 and q.dead() == []
    job = q.claim_one("w")
    assert job.id == 1 and job.attempts == 1


def test_purging_the_quarantine_forgets_dead_jobs(q):
    q.enqueue({"url": "a"})
    q.claim_one("w").fail("bad")
    from minikafka.ledger.consuming.quarantine import purge_in_current_transaction

    with q.source._ledger.atomic() as conn:  # what `minikafka quarantine jobs purge --all` does
        purge_in_current_transaction(conn, "jobs")
    assert q.stats()["dead"] == 0 and q.dead() == []

"""Work queues across real processes: exclusive claims, exactly-once processing, crash recovery."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

from pydantic import BaseModel

from minikafka import Source

CTX = multiprocessing.get_context("fork")


class Task(BaseModel):
    producer: int
    seq: int


def _claim_once(path: str, worker: str, start, results) -> None:
    with Source(path) as source:
        queue = source.queue("tasks", Task)
        start.wait()
        results.put([j.id for j in queue.claim_batch(worker, 10)])


def test_several_processes_claiming_one_job_have_exactly_one_winner(db_path):
    with Source(db_path) as source:
        source.queue("tasks", Task).enqueue({"producer": 0, "seq": 0})
    start, results = CTX.Event(), CTX.Queue()
    procs = [CTX.Process(target=_claim_once, args=(db_path, f"p{i}", start, results)) for i in range(5)]
    for p in procs:
        p.start()
    time.sleep(0.3)
    start.set()
    claimed = [results.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(30)
    assert sorted(i for ids in claimed for i in ids) == [1]


def _produce(path: str, producer: int, count: int) -> None:
    with Source(path) as source:
        queue = source.queue("tasks", Task, visibility_timeout=60)
        for seq in range(count):
            queue.enqueue({"producer": producer, "seq": seq})


def _work(path: str, worker: str, total: int) -> None:
    with Source(path) as source:
        queue = source.queue("tasks", Task, visibility_timeout=60)
        while True:
            job = queue.claim_one(worker)
            if job is None:
                with source.transaction() as tx:
                    if tx.query("SELECT count(*) AS n FROM processed")[0]["n"] >= total:
                        return
                queue.wait(timeout=0.2)
                continue
            with source.transaction() as tx:
                tx.execute("INSERT INTO processed (job_id, producer, seq, worker) VALUES (?, ?, ?, ?)",
                           (job.id, job.data.producer, job.data.seq, worker))
                assert job.ack(tx=tx)


def test_four_producers_and_six_workers_process_every_job_exactly_once(db_path):
    per_producer, producers = 30, 4
    total = per_producer * producers
    with Source(db_path) as source:
        source.queue("tasks", Task, visibility_timeout=60)
        with source.transaction() as tx:
            tx.execute("CREATE TABLE processed (job_id INTEGER, producer INTEGER, seq INTEGER, worker TEXT)")
    workers = [CTX.Process(target=_work, args=(db_path, f"w{i}", total)) for i in range(6)]
    makers = [CTX.Process(target=_produce, args=(db_path, i, per_producer)) for i in range(producers)]
    for p in workers + makers:
        p.start()
    for p in makers + workers:
        p.join(120)
        assert p.exitcode == 0
    with Source(db_path) as source:
        with source.transaction() as tx:
            rows = tx.query("SELECT job_id, producer, seq, worker FROM processed")
        queue = source.queue("tasks", Task, visibility_timeout=60)
        assert queue.stats() == {"pending": 0, "processing": 0, "dead": 0, "done": total, "cancelled": 0}
    assert len(rows) == total
    assert len({r["job_id"] for r in rows}) == total
    assert {(r["producer"], r["seq"]) for r in rows} == {(p, s) for p in range(producers) for s in range(per_producer)}


def _claim_and_hang(path: str, ready) -> None:
    with Source(path) as source:
        job = source.queue("tasks", Task, visibility_timeout=0.5).claim_one("doomed")
        ready.put(job.id)
        time.sleep(60)


def test_a_job_held_by_a_sigkilled_worker_comes_back_after_its_lease(db_path):
    with Source(db_path) as source:
        queue = source.queue("tasks", Task, visibility_timeout=0.5)
        queue.enqueue({"producer": 0, "seq": 0})
        ready = CTX.Queue()
        child = CTX.Process(target=_claim_and_hang, args=(db_path, ready))
        child.start()
        job_id = ready.get(timeout=30)
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        assert child.exitcode == -signal.SIGKILL
        assert queue.claim_one("survivor") is None  # the lease still holds
        assert queue.wait(timeout=5) is True  # woken by the lease expiry, not by a commit
        job = queue.claim_one("survivor")
        assert job.id == job_id and job.attempts == 2
        assert job.ack()


def _enqueue_later(path: str) -> None:
    time.sleep(0.2)
    with Source(path) as source:
        source.queue("tasks", Task).enqueue({"producer": 9, "seq": 9})


def test_claim_iterator_is_woken_by_an_enqueue_in_another_process(db_path):
    with Source(db_path) as source:
        queue = source.queue("tasks", Task)
        child = CTX.Process(target=_enqueue_later, args=(db_path,))
        child.start()
        started = time.monotonic()
        job = next(queue.claim("w", idle_poll=30))
        waited = time.monotonic() - started
        child.join(10)
        assert job.data == Task(producer=9, seq=9)
        assert waited < 20  # woken by the commit, not by the 30 s idle poll

"""asyncio forms of the waiting calls: they await the watcher and never block the event loop."""

from __future__ import annotations

import asyncio
import threading

from pydantic import BaseModel

from minikafka import Source
from tests.api.queue_child import Task


class Order(BaseModel):
    n: int


def _later(path: str, started: threading.Event, write) -> threading.Thread:
    """Another thread (its own Source) writes once the loop is waiting."""

    def run():
        started.wait(30)
        with Source(path) as src:
            write(src)

    t = threading.Thread(target=run)
    t.start()
    return t


async def _ticking(stop: asyncio.Event, ticks: list[int], started: threading.Event) -> None:
    while not stop.is_set():
        ticks.append(1)
        if len(ticks) == 5:
            started.set()  # the loop ran while the waiter waited
        await asyncio.sleep(0.005)


def test_claim_async_gets_a_job_enqueued_elsewhere_while_the_loop_keeps_running(db_path):
    async def main():
        with Source(db_path) as src:
            q = src.queue("tasks", Task)
            started, stop, ticks = threading.Event(), asyncio.Event(), []
            writer = _later(db_path, started, lambda s: s.queue("tasks", Task).enqueue({"n": 3}))
            ticker = asyncio.create_task(_ticking(stop, ticks, started))
            async for job in q.claim_async("w1", idle_poll=30):
                job.ack({"done": job.data.n})
                break
            stop.set()
            await ticker
            writer.join()
            assert len(ticks) >= 5
            assert await q.result_async(job.id, timeout=5) == {"done": 3}

    asyncio.run(main())


def test_topic_wait_async_and_listen_async_wake_on_another_connections_commit(db_path):
    async def main():
        with Source(db_path) as src:
            topic = src.topic("orders", Order, dedup=None)
            started, stop, ticks = threading.Event(), asyncio.Event(), []
            ticker = asyncio.create_task(_ticking(stop, ticks, started))

            def write(s):
                s.topic("orders", Order, dedup=None).append({"n": 1})
                s.notify("orders", {"n": 1})

            listener = src.listen_async("orders", timeout=30)  # sees what commits after it is made
            writer = _later(db_path, started, write)
            assert await topic.wait_async(timeout=30) is True
            got = None
            async for note in listener:
                got = note.payload
                break
            stop.set()
            await ticker
            writer.join()
            assert got == {"n": 1} and len(ticks) >= 5
            assert await topic.wait_async(timeout=0.05) is False

    asyncio.run(main())


def test_follow_async_yields_pending_then_new_rows(db_path):
    async def main():
        with Source(db_path) as src:
            topic = src.topic("orders", Order, dedup=None)
            topic.append({"n": 1})
            group = src.group("g")
            started = threading.Event()
            writer = _later(db_path, started, lambda s: s.topic("orders", Order, dedup=None).append({"n": 2}))
            seen = []
            async for batch in group.follow_async("orders", timeout=30):
                seen += [r.offset for r in batch]
                started.set()
                if len(seen) == 2:
                    break
            writer.join()
            assert seen == [1, 2]

    asyncio.run(main())


def test_async_waits_with_a_finite_timeout_return_after_it_and_the_loop_runs_meanwhile(db_path):
    """The async forms end their wait at the timeout (none spins or blocks the loop past it)."""
    import time

    async def main():
        with Source(db_path) as src:
            topic = src.topic("orders", Order, dedup=None)
            q = src.queue("tasks", Task)
            job_id = q.enqueue({"n": 1})
            assert q.claim_one("w") is not None  # processing: neither claimable nor finished
            started, stop, ticks = threading.Event(), asyncio.Event(), []
            ticker = asyncio.create_task(_ticking(stop, ticks, started))
            t0 = time.monotonic()
            assert await topic.wait_async(timeout=0.2) is False
            assert await q.wait_async(timeout=0.2) is False
            try:
                await q.result_async(job_id, timeout=0.2)
            except TimeoutError:
                pass
            else:
                raise AssertionError("result_async returned before the job finished")
            batches = [b async for b in src.group("g").follow_async("orders", timeout=0.2)]
            elapsed = time.monotonic() - t0
            stop.set()
            await ticker
            assert batches == [] and 0.8 <= elapsed < 10, elapsed
            assert len(ticks) >= 5  # the loop kept running while they waited

    asyncio.run(main())

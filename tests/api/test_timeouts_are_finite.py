"""Every timeout the API takes is a finite number of seconds >= 0 or None: NaN, infinities and
negatives are a clear error at the call, never a wait that does not end."""

from __future__ import annotations

import asyncio
import math

import pytest
from pydantic import BaseModel

from minikafka.errors import InvalidSettingError

BAD = [math.nan, math.inf, -math.inf, -1, "5", True]


class Order(BaseModel):
    order_id: int


@pytest.mark.parametrize("bad", BAD)
def test_follow_refuses_a_timeout_that_is_not_a_finite_number_at_the_call(file_source, bad):
    topic = file_source.topic("orders", Order, dedup=None)
    with pytest.raises(InvalidSettingError, match="follow timeout must be a finite number"):
        file_source.group("g").follow(topic, timeout=bad)


@pytest.mark.parametrize("bad", [math.nan, 0, -1])
def test_follow_refuses_a_poll_that_is_not_a_positive_finite_number(file_source, bad):
    topic = file_source.topic("orders", Order, dedup=None)
    with pytest.raises(ValueError, match="poll must be"):
        file_source.group("g").follow(topic, timeout=0, poll=bad)


@pytest.mark.parametrize("bad", BAD)
def test_listen_refuses_a_timeout_that_is_not_a_finite_number(file_source, bad):
    with pytest.raises(InvalidSettingError, match="listen timeout must be a finite number"):
        file_source.listen("ch", timeout=bad)


@pytest.mark.parametrize("bad", BAD)
def test_topic_and_queue_waits_refuse_a_timeout_that_is_not_a_finite_number(file_source, bad):
    topic = file_source.topic("orders", Order, dedup=None)
    q = file_source.queue("jobs", Order)
    with pytest.raises(InvalidSettingError, match="wait timeout"):
        topic.wait(timeout=bad)
    with pytest.raises(InvalidSettingError, match="wait timeout"):
        q.wait(timeout=bad)


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0, -1])
def test_queue_claim_refuses_an_idle_poll_that_is_not_a_positive_finite_number(file_source, bad):
    q = file_source.queue("jobs", Order)
    with pytest.raises(InvalidSettingError, match="idle_poll"):
        next(q.claim("w", idle_poll=bad))


def test_a_zero_timeout_still_returns_at_once(file_source):
    topic = file_source.topic("orders", Order, dedup=None)
    assert list(file_source.group("g").follow(topic, timeout=0)) == []
    assert topic.wait(timeout=0) is False
    assert list(file_source.listen("ch", timeout=0)) == []


# -- the asyncio side: the same refusals, from the same validation as the sync form ----------------

ASYNC_GUARD = 10  # seconds: a wait that spins instead of refusing fails here rather than hanging the suite


def _refused_async(make_call, what: str) -> None:
    async def main():
        with pytest.raises(InvalidSettingError, match=what):
            await asyncio.wait_for(make_call(), ASYNC_GUARD)

    asyncio.run(main())


@pytest.mark.parametrize("bad", BAD)
def test_async_waits_refuse_a_timeout_that_is_not_a_finite_number_instead_of_never_returning(file_source, bad):
    topic = file_source.topic("orders", Order, dedup=None)
    q = file_source.queue("jobs", Order)
    job_id = q.enqueue({"order_id": 1})
    _refused_async(lambda: topic.wait_async(timeout=bad), "wait timeout must be a finite number")
    _refused_async(lambda: q.wait_async(timeout=bad), "wait timeout must be a finite number")
    _refused_async(lambda: q.result_async(job_id, timeout=bad), "result timeout must be a finite number")

    async def follow():
        async for _batch in file_source.group("g").follow_async(topic, timeout=bad):
            pass

    _refused_async(follow, "follow timeout must be a finite number")


@pytest.mark.parametrize("bad", BAD)
def test_sync_result_refuses_a_timeout_that_is_not_a_finite_number(file_source, bad):
    q = file_source.queue("jobs", Order)
    job_id = q.enqueue({"order_id": 1})
    with pytest.raises(InvalidSettingError, match="result timeout must be a finite number"):
        q.result(job_id, timeout=bad)


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0, -1])
def test_async_follow_and_claim_refuse_a_poll_that_is_not_a_positive_finite_number(file_source, bad):
    topic = file_source.topic("orders", Order, dedup=None)
    q = file_source.queue("jobs", Order)

    async def follow():
        async for _batch in file_source.group("g").follow_async(topic, timeout=0, poll=bad):
            pass

    async def claim():
        async for _job in q.claim_async("w", idle_poll=bad):
            break

    _refused_async(follow, "poll must be")
    _refused_async(claim, "idle_poll")


def test_a_zero_timeout_still_returns_at_once_from_the_async_forms(file_source):
    topic = file_source.topic("orders", Order, dedup=None)
    q = file_source.queue("jobs", Order)
    job_id = q.enqueue({"order_id": 1})

    async def main():
        assert await topic.wait_async(timeout=0) is False
        assert await q.wait_async(timeout=0) is True  # a pending job is claimable
        with pytest.raises(TimeoutError, match="did not finish within 0"):
            await q.result_async(job_id, timeout=0)
        assert [b async for b in file_source.group("g").follow_async(topic, timeout=0)] == []

    asyncio.run(asyncio.wait_for(main(), ASYNC_GUARD))

"""Every timeout the API takes is a finite number of seconds >= 0 or None: NaN, infinities and
negatives are a clear error at the call, never a wait that does not end."""

from __future__ import annotations

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

"""notify(): a payload JSON cannot hold is an InvalidRecordError naming the channel and the problem."""

from __future__ import annotations

import pytest

from minikafka.errors import InvalidNameError, InvalidRecordError


def _count(source):
    return source._ledger.conn.execute("SELECT count(*) FROM _minikafka_notifications").fetchone()[0]


@pytest.mark.parametrize("value, where", [(float("nan"), "payload.x is NaN"), (float("inf"), "payload.x is Infinity"),
                                          ([1, float("-inf")], "payload.x[1] is -Infinity")])
def test_notify_refuses_nan_and_infinity_naming_channel_and_path(source, value, where):
    with pytest.raises(InvalidRecordError, match="channel 'ch'") as info:
        source.notify("ch", {"x": value})
    assert where in str(info.value) and "JSON has no NaN" in str(info.value)
    assert _count(source) == 0


@pytest.mark.parametrize("payload, what", [({"x": {1, 2}}, "set"), (object(), "object"), ({"b": b"x"}, "bytes")])
def test_notify_refuses_a_payload_json_cannot_hold(source, payload, what):
    with pytest.raises(InvalidRecordError, match="channel 'ch': the payload cannot be written as JSON") as info:
        source.notify("ch", payload)
    assert what in str(info.value)
    assert _count(source) == 0


def test_notify_refuses_a_payload_that_holds_itself(source):
    loop: list = []
    loop.append(loop)
    with pytest.raises(InvalidRecordError, match="Circular reference"):
        source.notify("ch", loop)


def test_bad_payload_in_a_transaction_leaves_the_transaction_usable(source):
    with source.transaction() as tx:
        with pytest.raises(InvalidRecordError):
            tx.notify("ch", {"x": float("nan")})
        tx.notify("ch", {"x": 1})
    assert _count(source) == 1


def test_notify_channel_must_be_a_non_empty_string(source):
    with pytest.raises(InvalidNameError, match="non-empty string"):
        source.notify("", {"x": 1})

"""Streams join a transaction like typed topics (``append(..., tx=)``), and streams,
notifications and job results refuse one and the same set of values: what JSON cannot
hold faithfully, named by its path (issue 21, cause 14)."""

from __future__ import annotations

from datetime import date, datetime, time, timezone
from decimal import Decimal

import pytest
from pydantic import BaseModel

from minikafka import InvalidRecordError, Source


class Order(BaseModel):
    order_id: str


def _notifications(source):
    return source._ledger.conn.execute("SELECT count(*) FROM _minikafka_notifications").fetchone()[0]


def test_an_event_appended_with_tx_commits_with_the_business_row(db_path):
    with Source(db_path) as source:
        orders = source.topic("orders", Order, dedup=None)
        events = source.stream("events")
        with source.transaction() as tx:
            orders.append({"order_id": "o1"}, tx=tx)
            got = events.append({"kind": "order_placed", "order_id": "o1"}, tx=tx)
            events.extend([{"kind": "audit", "n": 1}, {"kind": "audit", "n": 2}], tx=tx)
        assert got == {"kind": "order_placed", "order_id": "o1"}
    with Source(db_path) as source:  # durable: another connection sees both
        assert [o.order_id for o in source.topic("orders", Order, dedup=None).iter_new()] == ["o1"]
        assert list(source.stream("events").iter_new()) == [{"kind": "order_placed", "order_id": "o1"},
                                                 {"kind": "audit", "n": 1}, {"kind": "audit", "n": 2}]


def test_an_event_appended_with_tx_vanishes_when_the_block_raises(db_path):
    with Source(db_path) as source:
        orders = source.topic("orders", Order, dedup=None)
        events = source.stream("events")
        with pytest.raises(RuntimeError, match="payment declined"):
            with source.transaction() as tx:
                orders.append({"order_id": "o1"}, tx=tx)
                events.append({"kind": "order_placed", "order_id": "o1"}, tx=tx)
                events.extend([{"kind": "audit"}], tx=tx)
                raise RuntimeError("payment declined")
        assert orders.count() == 0 and events.count() == 0
    with Source(db_path) as source:
        assert source.stream("events").count() == 0


def test_a_stream_append_with_a_closed_or_foreign_tx_is_refused(source, tmp_path):
    from minikafka.errors import TransactionError
    events = source.stream("events")
    with source.transaction() as tx:
        pass
    with pytest.raises(TransactionError, match="closed"):
        events.append({"a": 1}, tx=tx)
    with Source(str(tmp_path / "other.sqlite")) as other, other.transaction() as foreign:
        with pytest.raises(TransactionError, match="belongs to Source"):
            events.append({"a": 1}, tx=foreign)
    assert events.count() == 0


NOT_JSON = [
    pytest.param({"a": {"b": datetime(2024, 1, 2, tzinfo=timezone.utc)}}, ".a.b", "datetime", id="datetime"),
    pytest.param({"a": {"b": date(2024, 1, 2)}}, ".a.b", "date", id="date"),
    pytest.param({"t": time(12, 0)}, ".t", "time", id="time"),
    pytest.param({"price": Decimal("1.10")}, ".price", "Decimal", id="Decimal"),
    pytest.param({"tags": {"x", "y"}}, ".tags", "set", id="set"),
    pytest.param({"tags": frozenset({"x"})}, ".tags", "frozenset", id="frozenset"),
    pytest.param({"raw": b"\x00"}, ".raw", "bytes", id="bytes"),
    pytest.param({"xs": [1, float("nan")]}, ".xs[1]", "NaN", id="NaN"),
    pytest.param({"x": float("inf")}, ".x", "Infinity", id="inf"),
    pytest.param({"x": float("-inf")}, ".x", "-Infinity", id="-inf"),
    pytest.param({"by_id": {1: "one"}}, ".by_id", "key 1 of type int", id="int-key"),
    pytest.param({"by_id": {None: "none"}}, ".by_id", "key None of type NoneType", id="None-key"),
    pytest.param({"o": object()}, ".o", "object", id="object"),
    pytest.param({"m": Order(order_id="x")}, ".m", "Order", id="model-inside"),
]


@pytest.mark.parametrize("payload, path, what", NOT_JSON)
def test_a_stream_append_of_a_value_json_cannot_hold_is_refused_naming_the_path_and_nothing_is_stored(
        source, payload, path, what):
    events = source.stream("events")
    with pytest.raises(InvalidRecordError, match="stream 'events'") as info:
        events.append(payload)
    assert f"${path}" in str(info.value) and what in str(info.value)
    with pytest.raises(InvalidRecordError):
        events.extend([{"ok": 1}, payload])
    with pytest.raises(InvalidRecordError), source.transaction() as tx:
        events.append({"ok": 1}, tx=tx)
        events.append(payload, tx=tx)
    assert events.count() == 0


def test_a_refused_stream_value_inside_a_transaction_leaves_the_transaction_usable(source):
    events = source.stream("events")
    with source.transaction() as tx:
        with pytest.raises(InvalidRecordError, match=r"\$\.when"):
            events.append({"when": datetime(2024, 1, 2)}, tx=tx)
        events.append({"when": "2024-01-02T00:00:00Z"}, tx=tx)
    assert list(events.iter_new()) == [{"when": "2024-01-02T00:00:00Z"}]


def test_plain_json_values_are_stored_and_read_back_equal(source):
    events = source.stream("events")
    value = {"s": "é", "i": 2**70, "f": 1.5, "b": True, "n": None, "l": [1, [2, {"k": "v"}]], "d": {"x": {}}}
    events.append(value)
    assert list(events.iter_new()) == [value]


@pytest.mark.parametrize("payload, path, what", NOT_JSON)
def test_notifications_and_streams_refuse_the_same_values(source, payload, path, what):
    events = source.stream("events")
    with pytest.raises(InvalidRecordError) as streamed:
        events.append(payload)
    with pytest.raises(InvalidRecordError) as notified:
        source.notify("ch", payload)
    assert f"${path}" in str(streamed.value) and f"payload{path}" in str(notified.value)
    # one rule: the same reason, only the root's name differs
    assert str(streamed.value).split(f"${path}", 1)[1] == str(notified.value).split(f"payload{path}", 1)[1]
    assert events.count() == 0 and _notifications(source) == 0


@pytest.mark.parametrize("payload, path, what", NOT_JSON)
def test_job_results_refuse_the_same_values_as_streams(payload, path, what):
    from minikafka.api.modes.queues import result_json
    with pytest.raises(InvalidRecordError, match="result of job 7 of queue 'tasks'") as info:
        result_json("tasks", 7, payload)
    assert f"result{path}" in str(info.value) and what in str(info.value)


def test_a_stream_value_that_holds_itself_is_refused(source):
    loop: dict = {}
    loop["me"] = loop
    with pytest.raises(InvalidRecordError, match=r"\$\.me holds itself"):
        source.stream("events").append(loop)
    with pytest.raises(InvalidRecordError, match=r"payload\.me holds itself"):
        source.notify("ch", loop)

"""ledger/consuming/deliveries.py: partition leases, the batch in flight, settling, quarantining and requeueing.

Times are passed in (milliseconds), so expiry is tested without sleeping.
"""

from __future__ import annotations

from pydantic import BaseModel

from minikafka.ledger.consuming import deliveries as state
from minikafka.ledger.consuming import quarantine as store
from minikafka.ledger.topics import acks
from minikafka.util.clock import utc_now


class Order(BaseModel):
    n: int


def group_on(source, rows=6):
    source.topic("orders", Order, dedup=None).extend([{"n": i} for i in range(1, rows + 1)])
    with source._ledger.atomic() as conn:
        return acks.register_group_in_current_transaction(conn, "orders", "shipper", utc_now())


def pending(source, cid):
    return [r.id for r in source.group("shipper").fetch("orders", 0, 100)]


def test_a_partition_lease_is_held_by_one_owner_until_it_expires(source):
    cid = group_on(source)
    with source._ledger.atomic() as conn:
        assert state.acquire_lease_in_current_transaction(conn, cid, 0, "a", 1_000, 500) is None
        assert state.acquire_lease_in_current_transaction(conn, cid, 0, "b", 1_499, 500) == "a"
        assert state.acquire_lease_in_current_transaction(conn, cid, 0, "a", 1_400, 500) is None  # a renewal
        assert state.acquire_lease_in_current_transaction(conn, cid, 0, "b", 1_899, 500) == "a"
        assert state.acquire_lease_in_current_transaction(conn, cid, 0, "b", 1_900, 500) is None  # expired
        assert state.lease_holder(conn, cid, 0) == ("b", 2_400)
        assert state.acquire_lease_in_current_transaction(conn, cid, 1, "a", 1_900, 500) is None  # per partition


def test_a_lease_whose_holder_is_gone_is_taken_at_once(source):
    cid = group_on(source)
    with source._ledger.atomic() as conn:
        state.acquire_lease_in_current_transaction(conn, cid, 0, "host:1:x", 1_000, 60_000)
        assert state.acquire_lease_in_current_transaction(conn, cid, 0, "host:2:y", 1_001, 60_000,
                                                          gone=lambda owner: False) == "host:1:x"
        assert state.acquire_lease_in_current_transaction(conn, cid, 0, "host:2:y", 1_001, 60_000,
                                                          gone=lambda owner: owner == "host:1:x") is None


def test_renewing_and_releasing_touch_only_the_owners_leases(source):
    cid = group_on(source)
    with source._ledger.atomic() as conn:
        state.acquire_lease_in_current_transaction(conn, cid, 0, "a", 0, 100)
        state.acquire_lease_in_current_transaction(conn, cid, 1, "b", 0, 100)
        assert state.renew_leases_in_current_transaction(conn, "a", 50, 100) == 1
        assert state.lease_holder(conn, cid, 0) == ("a", 150) and state.lease_holder(conn, cid, 1) == ("b", 100)
        assert state.release_leases_in_current_transaction(conn, "a") == 1
        assert state.lease_holder(conn, cid, 0) is None and state.lease_holder(conn, cid, 1) == ("b", 100)


def test_a_worker_that_lost_its_lease_records_and_commits_nothing(source):
    cid = group_on(source)
    with source._ledger.atomic() as conn:
        state.acquire_lease_in_current_transaction(conn, cid, 0, "old", 0, 100)
        assert state.record_inflight_in_current_transaction(conn, cid, 0, 1, 2, 2, utc_now(), owner="old")
        state.acquire_lease_in_current_transaction(conn, cid, 0, "new", 200, 100)  # took over after expiry
        assert not state.settle_batch_in_current_transaction(conn, "orders", cid, 0, [1, 2], utc_now(), owner="old")
        assert not state.record_inflight_in_current_transaction(conn, cid, 0, 3, 4, 2, utc_now(), owner="old")
        assert state.inflight_batch(conn, cid, 0) == (1, 2, 0)  # the new owner re-sends it, same key
        assert acks.committed_offset(conn, cid, 0) == 0
        assert state.settle_batch_in_current_transaction(conn, "orders", cid, 0, [1, 2], utc_now(), owner="new")
        assert acks.committed_offset(conn, cid, 0) == 2 and state.inflight_batch(conn, cid, 0) is None


def test_a_requeued_delivery_failure_is_pending_for_its_group_and_a_later_batch_does_not_skip_it(source):
    cid = group_on(source)
    with source._ledger.atomic() as conn:
        state.quarantine_batch_in_current_transaction(conn, "orders", "shipper", cid, 0, [(1, '{"n": 1}'),
                                                      (2, '{"n": 2}')], "HTTP 503", 3, utc_now())
        state.record_inflight_in_current_transaction(conn, cid, 0, 3, 4, 2, utc_now())
    [q1, q2] = store.list_quarantined(source._ledger.conn, "orders", oldest_first=True)
    assert (q1["origin"], q1["consumer"], q1["row_id"], q1["attempts"]) == ("delivery", "shipper", 1, 3)
    assert pending(source, cid) == [3, 4, 5, 6]
    with source._ledger.atomic() as conn:
        assert state.requeue_in_current_transaction(conn, "orders", "shipper", 2, utc_now()) is None
        # the batch that was in flight meanwhile is settled: row 2 stays pending
        state.settle_batch_in_current_transaction(conn, "orders", cid, 0, [3, 4], utc_now())
    assert pending(source, cid) == [2, 5, 6]
    with source._ledger.atomic() as conn:
        state.settle_batch_in_current_transaction(conn, "orders", cid, 0, [2, 5], utc_now())
        assert acks.committed_offset(conn, cid, 0) == 5
    assert pending(source, cid) == [6]


def test_a_requeue_that_cannot_be_done_says_why(source):
    group_on(source)
    with source._ledger.atomic() as conn:
        assert "no longer registered" in state.requeue_in_current_transaction(conn, "orders", "gone", 1, utc_now())
        assert "no longer in topic" in state.requeue_in_current_transaction(conn, "orders", "shipper", 99, utc_now())
        assert "without its group" in state.requeue_in_current_transaction(conn, "orders", None, 1, utc_now())


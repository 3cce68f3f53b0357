"""Consumer groups: fetch above the committed offset, monotonic commits, seek, lag, follow."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import (
    InvalidNameError,
    InvalidOffsetError,
    PartitionOutOfRangeError,
    TopicNotFoundError,
    TransactionError,
)


class Order(BaseModel):
    user: str
    n: int


@pytest.fixture
def orders(source):
    topic = source.topic("orders", Order, dedup=None)
    topic.extend([{"user": "u", "n": n} for n in range(10)])
    return topic


def offsets(batch):
    return [r.offset for r in batch]


def test_fetch_returns_the_oldest_rows_first_and_never_advances(source, orders):
    group = source.group("g")
    first = group.fetch(orders, 0, max_messages=3)
    assert offsets(first) == [1, 2, 3] and [r.data.n for r in first] == [0, 1, 2]
    assert offsets(group.fetch(orders, 0, max_messages=3)) == [1, 2, 3]
    assert group.committed(orders, 0) == 0


def test_fetch_of_a_topic_that_does_not_exist_returns_nothing(source):
    assert source.group("g").fetch("nowhere") == []
    assert source.group("g").committed("nowhere", 0) == 0 and source.group("g").lag("nowhere") == {}


def test_commit_moves_the_offset_and_the_next_fetch_starts_after_it(source, orders):
    group = source.group("g")
    assert group.commit(orders, 0, 3) is True
    assert group.committed(orders, 0) == 3
    assert offsets(group.fetch(orders, 0, max_messages=2)) == [4, 5]


def test_commit_below_the_committed_offset_is_a_noop_that_returns_false(source, orders):
    group = source.group("g")
    group.commit(orders, 0, 5)
    assert group.commit(orders, 0, 2) is False and group.commit(orders, 0, 5) is False
    assert group.committed(orders, 0) == 5


def test_seek_rewinds_explicitly_and_forward_too(source, orders):
    group = source.group("g")
    group.commit(orders, 0, 8)
    group.seek(orders, 0, 2)
    assert group.committed(orders, 0) == 2 and offsets(group.fetch(orders, 0, 3)) == [3, 4, 5]
    group.seek(orders, 0, 9)
    assert offsets(group.fetch(orders, 0)) == [10]


def test_two_groups_are_independent(source, orders):
    a, b = source.group("a"), source.group("b")
    a.fetch(orders), b.fetch(orders)
    a.commit(orders, 0, 7)
    assert b.committed(orders, 0) == 0 and offsets(b.fetch(orders, 0, 2)) == [1, 2]
    b.commit(orders, 0, 2)
    assert a.committed(orders, 0) == 7 and offsets(a.fetch(orders, 0)) == [8, 9, 10]
    assert a.lag(orders) == {0: 3} and b.lag(orders) == {0: 8}


def test_restart_resumes_each_group_from_its_last_commit(db_path):
    with Source(db_path) as src:
        orders = src.topic("orders", Order, dedup=None, partitions=2)
        orders.extend([{"user": "u", "n": n} for n in range(10)])
        src.group("a").commit(orders, 0, 5)
        src.group("b").commit(orders, 1, 6)
    with Source(db_path) as src:
        orders = src.topic("orders", Order, dedup=None)
        a, b = src.group("a"), src.group("b")
        assert (a.committed(orders, 0), a.committed(orders, 1)) == (5, 0)
        assert (b.committed(orders, 0), b.committed(orders, 1)) == (0, 6)
        assert offsets(a.fetch(orders, 0)) == [6, 8, 10]  # rows alternate: even ids in partition 0
        assert offsets(b.fetch(orders, 1)) == [7, 9]


def test_fetch_and_commit_work_per_partition(source):
    orders = source.topic("orders", Order, dedup=None, partitions=3)
    orders.extend([{"user": "u", "n": n} for n in range(9)])
    group = source.group("g")
    for p in range(3):
        batch = group.fetch(orders, p)
        assert {r.partition for r in batch} == {p} and offsets(batch) == sorted(offsets(batch))
        group.commit(orders, p, batch[-1].offset)
    assert group.lag(orders) == {0: 0, 1: 0, 2: 0} and orders.count("handled") == 9


def test_a_group_is_a_consumer_listed_by_the_topic(source, orders):
    source.group("order-processors").fetch(orders)
    assert orders.consumers() == ["order-processors"]


def test_a_new_group_starts_at_the_beginning_of_the_log(source, orders):
    first = source.group("first")
    first.commit(orders, 0, 6)
    assert orders.count("handled") == 6  # the only consumer is past them
    late = source.group("late")
    assert late.committed(orders, 0) == 0 and late.lag(orders) == {0: 10}
    assert offsets(late.fetch(orders, 0, 2)) == [1, 2]
    assert orders.count("handled") == 0 and offsets(first.fetch(orders, 0)) == [7, 8, 9, 10]


def test_rows_turn_handled_once_every_consumer_is_past_them(source, orders):
    a, b = source.group("a"), source.group("b")
    a.fetch(orders), b.fetch(orders)
    a.commit(orders, 0, 10)
    assert orders.count("handled") == 0 and orders.count("new") == 10
    b.commit(orders, 0, 4)
    assert orders.count("handled") == 4 and orders.count("new") == 6
    assert [r.id for r in orders.iter_handled(records=True)] == [1, 2, 3, 4]
    assert [r.status for r in orders.iter_handled(records=True)] == ["handled"] * 4
    assert orders.get(4).status == "handled" and orders.get(5).status == "new"
    assert list(orders.to_arrow().column("_status").to_pylist()) == ["handled"] * 4 + ["new"] * 6


def test_a_commit_covering_many_rows_writes_no_row_per_message(source):
    orders = source.topic("orders", Order, dedup=None)
    orders.extend([{"user": "u", "n": n} for n in range(5000)])
    group = source.group("g")
    group.fetch(orders, 0, 1)
    conn = source._ledger.conn
    before = conn.total_changes
    assert group.commit(orders, 0, 5000)
    assert conn.total_changes - before <= 3  # the offset row and the partition's position
    assert conn.execute("SELECT count(*) FROM _minikafka_acks").fetchone() == (0,)
    assert orders.count("new") == 0 and group.lag(orders) == {0: 0}


def test_record_ack_after_a_fetch_moves_the_same_offset(source, orders):
    group = source.group("g")
    batch = group.fetch(orders, 0, 3)
    batch[0].ack()
    assert group.committed(orders, 0) == 1
    batch[2].ack()  # out of order: kept as an ack above the offset
    assert group.committed(orders, 0) == 1 and offsets(group.fetch(orders, 0, 3)) == [2, 4, 5]
    batch[1].ack()  # the gap closes: everything folds into the offset
    assert group.committed(orders, 0) == 3
    assert source._ledger.conn.execute("SELECT count(*) FROM _minikafka_acks").fetchone() == (0,)


def test_a_pipe_consuming_as_g_and_group_g_see_the_same_state(source, orders):
    out = source.topic("out", Order, dedup=None)
    orders.pipe(lambda o: o, consumer="g").to(out).run()
    group = source.group("g")
    assert group.committed(orders, 0) == 10 and group.fetch(orders) == []
    group.seek(orders, 0, 6)
    assert [r.id for r in orders.iter_new(records=True, consumer="g")] == [7, 8, 9, 10]


def test_commit_joins_an_enclosing_transaction_and_rolls_back_with_it(source, orders):
    group = source.group("g")
    with pytest.raises(RuntimeError):
        with source.transaction() as tx:
            assert group.commit(orders, 0, 4, tx=tx)
            orders.append({"user": "in-tx", "n": 99}, tx=tx)
            raise RuntimeError("the caller's own write failed")
    assert orders.count() == 10
    assert group.committed(orders, 0) == 0
    with source.transaction() as tx:
        group.commit(orders, 0, 4, tx=tx)
    assert group.committed(orders, 0) == 4


def test_bad_input_names_the_thing_and_moves_no_commit(source, orders):
    group = source.group("g")
    group.commit(orders, 0, 2)
    with pytest.raises(PartitionOutOfRangeError, match="'orders' has partitions 0..0; got partition 3"):
        group.commit(orders, 3, 1)
    with pytest.raises(TopicNotFoundError, match="'ghost'"):
        group.commit("ghost", 0, 1)
    with pytest.raises(InvalidOffsetError, match="non-negative integer, got '5'"):
        group.commit(orders, 0, "5")
    with pytest.raises(InvalidOffsetError, match="non-negative integer"):
        group.commit(orders, 0, True)
    with pytest.raises(InvalidOffsetError, match="beyond the last offset \\(10\\)"):
        group.commit(orders, 0, 11)
    with pytest.raises(InvalidOffsetError, match="non-negative"):
        group.seek(orders, 0, -1)
    with pytest.raises(PartitionOutOfRangeError):
        group.fetch(orders, 1)
    with pytest.raises(InvalidNameError, match="consumer"):
        source.group("bad name")
    with pytest.raises(TransactionError, match="tx must come from source.transaction"):
        group.commit(orders, 0, 3, tx=object())
    assert group.committed(orders, 0) == 2


def test_follow_yields_pending_rows_then_new_ones_then_stops_after_the_timeout(source):
    orders = source.topic("orders", Order, dedup=None, partitions=2)
    orders.extend([{"user": "u", "n": n} for n in range(4)])
    now = [0.0]
    appended = []

    def sleep(seconds):  # the injected clock: appending while "asleep" stands for another writer
        now[0] += seconds
        if not appended:
            appended.append(orders.append({"user": "late", "n": 99}))

    batches = list(source.group("g").follow(orders, max_messages=10, timeout=1.0, poll=0.25,
                                            sleep=sleep, clock=lambda: now[0]))
    assert [offsets(b) for b in batches] == [[2, 4], [1, 3], [5]]
    assert now[0] == pytest.approx(1.25)  # one wait before the late row, then a second of silence


def test_follow_of_chosen_partitions_only(source):
    orders = source.topic("orders", Order, dedup=None, partitions=2)
    orders.extend([{"user": "u", "n": n} for n in range(4)])
    batches = list(source.group("g").follow(orders, partitions=[1], timeout=0))
    assert [offsets(b) for b in batches] == [[1, 3]]


def test_follow_wakes_on_a_commit_from_another_connection(db_path):
    import threading
    import time

    with Source(db_path) as src:
        orders = src.topic("orders", Order, dedup=None)
        orders.append({"user": "u", "n": 0})

        def writer():
            time.sleep(0.3)
            with Source(db_path) as other:
                other.topic("orders", Order, dedup=None).append({"user": "late", "n": 1})

        t = threading.Thread(target=writer)
        t.start()
        t0 = time.monotonic()
        batches = []
        for batch in src.group("g").follow(orders, timeout=5):
            batches.append([r.offset for r in batch])
            if len(batches) == 2:
                break
        t.join()
        assert batches == [[1], [2]] and time.monotonic() - t0 < 4

"""The one ack model: committed offsets, out-of-order acks above them, handled positions."""

from __future__ import annotations

from pydantic import BaseModel

from minikafka.ledger.topics import acks
from minikafka.util.clock import utc_now


class Order(BaseModel):
    user: str
    n: int


def fill(source, n=10, partitions=1):
    topic = source.topic("orders", Order, dedup=None, partitions=partitions)
    topic.extend([{"user": "u", "n": i} for i in range(n)])
    return topic


def ack_upto(source, consumer, upto, failed=()):
    with source._ledger.atomic() as conn:
        cid = acks.register_consumer_in_current_transaction(conn, "orders", consumer, utc_now())
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS mk_exclude (id INTEGER PRIMARY KEY)")
        conn.execute("DELETE FROM temp.mk_exclude")
        conn.executemany("INSERT INTO temp.mk_exclude (id) VALUES (?)", [(i,) for i in failed])
        return acks.ack_upto_in_current_transaction(conn, "orders", cid, upto, utc_now(), exclude=bool(failed))


def test_a_stage_commit_moves_the_offset_a_group_reads(source):
    orders = fill(source)
    orders.consumer("stage")
    assert ack_upto(source, "stage", 6) == 6
    assert source.group("stage").committed(orders, 0) == 6
    assert [r.offset for r in source.group("stage").fetch(orders)] == [7, 8, 9, 10]


def test_failed_rows_of_a_stage_stay_pending_and_the_offset_stops_below_them(source):
    orders = fill(source)
    orders.consumer("stage")
    assert ack_upto(source, "stage", 8, failed=[3, 5]) == 6
    assert source.group("stage").committed(orders, 0) == 2
    assert [r.id for r in orders.iter_new(records=True, consumer="stage")] == [3, 5, 9, 10]
    assert orders.count("handled") == 6  # the only consumer: done rows are handled
    ack_upto(source, "stage", 10)
    assert source.group("stage").committed(orders, 0) == 10
    assert source._ledger.conn.execute("SELECT count(*) FROM _minikafka_acks").fetchone() == (0,)


def test_replay_below_the_handled_position_reopens_only_that_range_for_one_consumer(source):
    orders = fill(source, partitions=2)
    a, b = source.group("a"), source.group("b")
    for g in (a, b):
        for p in (0, 1):
            g.commit(orders, p, 10 if p == 0 else 9)
    assert orders.count("handled") == 10
    assert orders.replay("a", from_id=3, to_id=6) == 4
    assert [r.id for r in orders.iter_new(records=True, consumer="a")] == [3, 4, 5, 6]
    assert orders.count("new", consumer="b") == 0
    assert sorted(r.id for r in orders.iter_new(records=True)) == [3, 4, 5, 6]
    for rec in orders.iter_new(records=True, consumer="a"):
        rec.ack()
    assert orders.count("handled") == 10 and (a.committed(orders, 0), a.committed(orders, 1)) == (10, 9)


def test_a_topic_wide_ack_above_the_offsets_is_done_for_every_consumer(source):
    orders = fill(source, 5)
    group = source.group("g")
    group.fetch(orders)
    orders.set_handled(3)
    assert [r.offset for r in group.fetch(orders)] == [1, 2, 4, 5]
    group.commit(orders, 0, 2)
    orders.set_handled(4, consumer="g")
    assert [r.offset for r in group.fetch(orders)] == [5]


def test_dropping_a_lagging_consumer_hands_its_rows_to_the_handled_position(source):
    orders = fill(source, 6)
    fast, slow = source.group("fast"), source.group("slow")
    slow.fetch(orders)
    fast.commit(orders, 0, 6)
    assert orders.count("handled") == 0
    orders.drop_consumer("slow")
    assert orders.count("handled") == 6 and orders.consumers() == ["fast"]


def test_pending_reads_start_at_the_lowest_offset_not_the_first_row(source):
    fill(source, 3)
    cid = source.group("g")._consumer_id("orders", register=True)
    where, params = acks.pending_filter(cid, "orders")
    plan = source._ledger.conn.execute(
        f'EXPLAIN QUERY PLAN SELECT "_id" FROM "orders" WHERE {where} ORDER BY "_id"', params).fetchall()
    assert any("rowid>?" in str(row).replace(" ", "") for row in plan)  # _id is the rowid


def test_the_inlined_pending_read_of_some_partitions_reads_only_those_partitions(source):
    fill(source, 9, partitions=3)
    conn = source._ledger.conn
    cid = source.group("g")._consumer_id("orders", register=True)
    for parts in ([0], [1, 2], None):
        for consumer in (cid, None):
            where = acks.pending_sql(conn, "orders", consumer, parts)
            seen = {p for (p,) in conn.execute(f'SELECT "_partition" FROM "orders" WHERE {where}')}
            assert seen == set(parts or [0, 1, 2]), (parts, consumer)

"""Partitions: a column on the topic table, stable key routing, stored count and key."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import PartitionOutOfRangeError, SchemaMismatchError
from minikafka.ledger.topics.layout import key_partition


class Order(BaseModel):
    user: str
    n: int


def test_topics_have_one_partition_by_default_and_records_carry_partition_and_offset(source):
    orders = source.topic("orders", Order, dedup=None)
    orders.append({"user": "a", "n": 1})
    rec = next(orders.iter_new(records=True))
    assert orders.partitions == 1 and rec.partition == 0 and rec.offset == rec.id == 1


def test_the_same_key_always_lands_in_the_same_partition(source):
    orders = source.topic("orders", Order, dedup=None, partitions=4, key=("user",))
    for n in range(3):
        for user in ("alice", "bob", "carol", "dave"):
            orders.append({"user": user, "n": n})
    seen = {(r.data.user, r.partition) for r in orders.iter_new(records=True)}
    # fixed expectations: the hash is part of the file format, the same in every version
    assert seen == {("alice", 0), ("bob", 1), ("carol", 3), ("dave", 3)}


def test_key_routing_is_a_fixed_function_of_the_values_and_the_count():
    assert [key_partition([k], 4) for k in ("alice", "bob", "carol", "dave", 42)] == [0, 1, 3, 3, 3]
    assert key_partition(["alice", 7], 8) == 6


def test_key_routing_is_the_same_in_another_process():
    code = "from minikafka.ledger.topics.layout import key_partition; print([key_partition([k], 16) for k in 'abcdefgh'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str([key_partition([k], 16) for k in "abcdefgh"])


def test_an_explicit_partition_wins_over_the_key(source):
    orders = source.topic("orders", Order, dedup=None, partitions=4, key=("user",))
    orders.append({"user": "alice", "n": 1}, partition=2)
    assert next(orders.iter_new(records=True)).partition == 2


def test_rows_without_a_key_spread_evenly(source):
    orders = source.topic("orders", Order, dedup=None, partitions=4)
    for n in range(6):
        orders.append({"user": "x", "n": n})
    orders.extend([{"user": "y", "n": n} for n in range(6)])
    counts = Counter(r.partition for r in orders.iter_new(records=True))
    assert counts == {0: 3, 1: 3, 2: 3, 3: 3}


def test_offsets_increase_within_a_partition_and_are_never_reused(source):
    orders = source.topic("orders", Order, dedup=None, partitions=3)
    orders.extend([{"user": "u", "n": n} for n in range(30)])
    by_partition: dict[int, list[int]] = {}
    for r in orders.iter_new(records=True):
        by_partition.setdefault(r.partition, []).append(r.offset)
    all_offsets = [o for offsets in by_partition.values() for o in offsets]
    assert all(offsets == sorted(offsets) for offsets in by_partition.values())
    assert len(set(all_offsets)) == 30


def test_reopening_with_another_partition_count_raises_schema_mismatch(db_path):
    with Source(db_path) as src:
        src.topic("orders", Order, dedup=None, partitions=4, key=("user",))
    with Source(db_path) as src:
        with pytest.raises(SchemaMismatchError, match="partition count differs: stored 4, given 2"):
            src.topic("orders", Order, dedup=None, partitions=2)
        with pytest.raises(SchemaMismatchError, match="key fields differ"):
            src.topic("orders", Order, dedup=None, key=("n",))
        reopened = src.topic("orders", Order, dedup=None)  # omitted: as stored
        assert reopened.partitions == 4 and reopened.key == ("user",)


def test_partition_out_of_range_on_append_is_refused_and_nothing_is_written(source):
    orders = source.topic("orders", Order, dedup=None, partitions=2)
    for bad in (2, -1, "0", True):
        with pytest.raises(PartitionOutOfRangeError, match="partitions 0..1"):
            orders.append({"user": "a", "n": 1}, partition=bad)
    assert orders.count() == 0


def test_bad_partition_counts_and_key_fields_are_refused(source):
    with pytest.raises(ValueError, match="partitions must be an integer from 1"):
        source.topic("orders", Order, dedup=None, partitions=0)
    with pytest.raises(ValueError, match="key fields are not present"):
        source.topic("orders", Order, dedup=None, partitions=2, key=("nope",))


def test_migrate_keeps_partitions_key_and_each_rows_partition(source):
    class OrderV2(BaseModel):
        user: str
        n: int
        note: str = ""

    orders = source.topic("orders", Order, dedup=None, partitions=4, key=("user",))
    orders.extend([{"user": u, "n": 1} for u in ("alice", "bob", "carol")])
    before = {r.id: r.partition for r in orders.iter_new(records=True)}
    v2 = orders.migrate(OrderV2, lambda o: {**o.model_dump(), "note": "x"})
    assert v2.partitions == 4 and v2.key == ("user",)
    assert {r.id: r.partition for r in v2.iter_new(records=True)} == before


def test_a_partition_index_serves_reads_of_one_partition(source):
    source.topic("orders", Order, dedup=None, partitions=4)
    plan = source._ledger.conn.execute(
        'EXPLAIN QUERY PLAN SELECT "_id" FROM "orders" WHERE "_partition" = 1 AND "_id" > 5 ORDER BY "_id"'
    ).fetchall()
    assert any("orders__partition" in str(row) for row in plan)


def test_a_row_level_pipe_routes_its_outputs_into_a_partitioned_target(source):
    orders = source.topic("orders", Order, dedup=None)
    orders.extend([{"user": u, "n": i} for i, u in enumerate(["alice", "bob", "carol", "dave"])])
    routed = source.topic("routed", Order, dedup=None, partitions=4, key=("user",))
    orders.pipe(lambda o: o).to(routed).run()
    assert {(r.data.user, r.partition) for r in routed.iter_new(records=True)} == {
        ("alice", 0), ("bob", 1), ("carol", 3), ("dave", 3)}


def test_the_stage_commit_routes_staged_rows_into_a_partitioned_target(db_path):
    import pyarrow as pa

    from minikafka.ledger.consuming import RunResult
    from minikafka.ledger.transactions import StagedOutput, commit_stage

    with Source(db_path) as src:
        routed = src.topic("routed", Order, dedup=None, partitions=4, key=("user",))
        batch = pa.record_batch({"user": ["alice", "bob", "carol"], "n": [1, 2, 3]})
        commit_stage(src._ledger, RunResult("r1", "stage"), consumer="s", inputs=[],
                     outputs=[StagedOutput(routed.layout, [batch])])
        assert {(r.data.user, r.partition) for r in routed.iter_new(records=True)} == {
            ("alice", 0), ("bob", 1), ("carol", 3)}


def test_the_stage_commit_routes_and_deduplicates_staged_rows_of_a_partitioned_target(db_path):
    import pyarrow as pa

    from minikafka.ledger.consuming import RunResult
    from minikafka.ledger.transactions import StagedOutput, commit_stage

    with Source(db_path) as src:
        routed = src.topic("routed", Order, dedup=("n",), partitions=4, key=("user",))
        routed.append({"user": "zed", "n": 3})
        batch = pa.record_batch({"user": ["alice", "bob", "carol", "bob"], "n": [1, 2, 3, 2]})
        run = commit_stage(src._ledger, RunResult("r1", "stage"), consumer="s", inputs=[],
                           outputs=[StagedOutput(routed.layout, [batch])])
        assert (run.rows_out, run.rows_duplicate) == (2, 2)
        assert {(r.data.user, r.data.n, r.partition) for r in routed.iter_new(records=True)} == {
            ("zed", 3, 0), ("alice", 1, 0), ("bob", 2, 1)}
        conn = src._ledger.conn
        assert conn.execute('SELECT count(*) FROM routed WHERE "_key" = minikafka_key(n)').fetchone()[0] == 3

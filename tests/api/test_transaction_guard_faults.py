"""The caller's SQL in a transaction can neither redirect the ledger's statements (TEMP objects
that shadow a topic or a ledger table) nor end the transaction (whatever the text looks like)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import ProtectedTableError, TransactionError


class Order(BaseModel):
    order_id: int
    total: int


def test_a_temp_table_named_like_a_topic_is_refused_and_later_appends_are_kept(db_path):
    with Source(db_path) as source:
        orders = source.topic("orders", Order, dedup=("order_id",))
        with source.transaction() as tx:
            with pytest.raises(ProtectedTableError, match="TEMP.*'orders'"):
                tx.execute("CREATE TEMP TABLE orders AS SELECT * FROM main.orders WHERE 0")
            with pytest.raises(ProtectedTableError, match="TEMP.*'orders'"):
                tx.execute("CREATE TEMP VIEW orders AS SELECT 1")
            with pytest.raises(ProtectedTableError, match="TEMP"):
                tx.execute("CREATE TABLE temp.orders (x)")
        for i in range(3):
            orders.append({"order_id": i, "total": i})
    with Source(db_path) as source:
        assert source.topic("orders", Order, dedup=("order_id",)).count() == 3


def test_a_temp_table_named_like_a_ledger_table_cannot_swallow_a_group_commit(db_path):
    with Source(db_path) as source:
        orders = source.topic("orders", Order, dedup=("order_id",))
        orders.append({"order_id": 1, "total": 1})
        with source.transaction() as tx:
            with pytest.raises(ProtectedTableError, match="_minikafka_offsets"):
                tx.execute("CREATE TEMP TABLE _minikafka_offsets (x)")
            with pytest.raises(ProtectedTableError, match="TEMP"):
                tx.execute("CREATE TEMP TRIGGER t AFTER INSERT ON orders BEGIN SELECT 1; END")
        assert source.group("g").commit(orders, 0, 1)
    with Source(db_path) as source:
        assert source.group("g").committed("orders", 0) == 1


def test_a_temp_staging_table_with_its_own_name_still_works(file_source):
    file_source.topic("orders", Order, dedup=None)
    with file_source.transaction() as tx:
        tx.execute("CREATE TEMP TABLE staging AS SELECT * FROM main.orders WHERE 0")
        assert tx.execute("INSERT INTO staging (order_id, total) VALUES (1, 2)") == 1


@pytest.mark.parametrize("sql", ["/* x */ COMMIT", "-- x\nROLLBACK", "\ufeffCOMMIT", "/**/END",
                                 "/* x */ SAVEPOINT s", "/* x */ BEGIN"])
def test_a_control_statement_hidden_behind_a_comment_or_bom_is_refused(file_source, sql):
    orders = file_source.topic("orders", Order, dedup=None)
    with file_source.transaction() as tx:
        orders.append({"order_id": 1, "total": 1}, tx=tx)
        with pytest.raises(TransactionError, match="control statements are not allowed"):
            tx.execute(sql)
        assert tx.active and file_source.ledger.in_transaction
    assert orders.count() == 1


@pytest.mark.parametrize("sql", ["/* x */ COMMIT", "-- x\nROLLBACK", "\ufeffCOMMIT"])
def test_jobs_enqueued_in_a_block_that_raised_are_not_committed_even_after_a_hidden_commit(db_path, sql):
    with Source(db_path) as source:
        q = source.queue("jobs", Order)
        with pytest.raises(RuntimeError):
            with source.transaction() as tx:
                q.enqueue({"order_id": 1, "total": 1}, tx=tx)
                try:
                    tx.execute(sql)
                except TransactionError:
                    pass
                raise RuntimeError("the block fails")
    with Source(db_path) as source:
        assert source.queue("jobs", Order).stats()["pending"] == 0

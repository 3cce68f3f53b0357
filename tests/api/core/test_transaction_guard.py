"""tx.execute / tx.query write only the caller's own tables; the ledger's tables and topics are guarded."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from minikafka.errors import ProtectedTableError, TransactionError


class Order(BaseModel):
    order_id: int
    total: int


@pytest.fixture
def orders(file_source):
    topic = file_source.topic("order.events", Order, dedup=("order_id",))
    topic.append({"order_id": 1, "total": 10})
    return topic


@pytest.mark.parametrize("sql", [
    "DELETE FROM _minikafka_topics",
    "UPDATE _minikafka_consumers SET name = 'x'",
    "INSERT INTO _minikafka_quarantine (topic, payload, reason, origin, created_at) VALUES ('a', '', '', '', '')",
    "DROP TABLE _minikafka_runs",
    "ALTER TABLE _minikafka_acks ADD COLUMN x INTEGER",
    "CREATE INDEX my_idx ON _minikafka_acks (row_id)",
    "CREATE TABLE _minikafka_mine (x)",
    "PRAGMA writable_schema = 1",
])
def test_tx_execute_refuses_writes_to_ledger_tables_and_names_the_table(file_source, orders, sql):
    with file_source.transaction() as tx:
        with pytest.raises(ProtectedTableError, match="may not .*'(_minikafka_|PRAGMA)"):
            tx.execute(sql)
    assert file_source.topics() == ["order.events"]
    assert orders.count() == 1


@pytest.mark.parametrize("sql", [
    'DELETE FROM "order.events"',
    'UPDATE "order.events" SET total = 0',
    'DROP TABLE "order.events"',
    'CREATE INDEX by_total ON "order.events" (total)',
    'DROP TRIGGER "order.events__append_only"',
])
def test_tx_execute_refuses_writes_to_topic_tables_and_points_at_topic_append(file_source, orders, sql):
    with file_source.transaction() as tx:
        with pytest.raises(ProtectedTableError, match=r"'order.events'.*topic.append"):
            tx.execute(sql)
    assert [m.total for m in orders.iter_new()] == [10]


def test_a_refused_statement_leaves_the_transaction_open_and_its_earlier_writes_commit(file_source, orders):
    with file_source.transaction() as tx:
        tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
        tx.execute("INSERT INTO orders (total) VALUES (?)", (42,))
        with pytest.raises(ProtectedTableError):
            tx.execute("DELETE FROM _minikafka_topics")
        orders.append({"order_id": 2, "total": 20}, tx=tx)
    with file_source.transaction() as tx:
        assert tx.query("SELECT total FROM orders") == [{"total": 42}]
    assert orders.count() == 2 and file_source.topics() == ["order.events"]


def test_an_uncaught_protected_table_error_rolls_the_whole_transaction_back(file_source, orders):
    with pytest.raises(ProtectedTableError):
        with file_source.transaction() as tx:
            tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
            tx.execute("DELETE FROM _minikafka_topics")
    with file_source.transaction() as tx:
        assert tx.query("SELECT name FROM sqlite_master WHERE name = 'orders'") == []


def test_protected_table_error_is_a_transaction_error(file_source, orders):
    with file_source.transaction() as tx:
        with pytest.raises(TransactionError):
            tx.query("DELETE FROM _minikafka_topics RETURNING name")


def test_tx_reads_ledger_and_topic_tables_and_writes_its_own_freely(file_source, orders):
    with file_source.transaction() as tx:
        assert tx.query("SELECT name FROM _minikafka_topics") == [{"name": "order.events"}]
        assert tx.query('SELECT order_id, total FROM "order.events"') == [{"order_id": 1, "total": 10}]
        tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
        tx.execute("CREATE INDEX orders_by_total ON orders (total)")
        tx.execute('INSERT INTO orders (total) SELECT total FROM "order.events"')
        assert tx.execute("UPDATE orders SET total = total + 1") == 1
        tx.execute("DROP TABLE orders")


def test_a_user_trigger_cannot_reach_the_ledger_tables_through_a_user_table(file_source, orders):
    with file_source.transaction() as tx:
        tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        tx.execute("CREATE TRIGGER wipe AFTER INSERT ON orders BEGIN DELETE FROM _minikafka_topics; END")
        with pytest.raises(ProtectedTableError, match="_minikafka_topics"):
            tx.execute("INSERT INTO orders (id) VALUES (1)")
    assert file_source.topics() == ["order.events"]


def test_the_guard_is_lifted_after_each_statement_so_the_ledgers_own_writes_work(file_source, orders):
    q = file_source.queue("emails", Order)
    with file_source.transaction() as tx:
        with pytest.raises(ProtectedTableError):
            tx.execute("DELETE FROM _minikafka_queue_jobs")
        q.enqueue({"order_id": 7, "total": 1}, tx=tx)
        orders.append({"order_id": 3, "total": 30}, tx=tx)
        tx.notify("orders", {"id": 3})
    assert q.stats()["pending"] == 1 and orders.count() == 2


@pytest.mark.parametrize("spelling", ["path", "relative", "symlink", "uri"])
def test_attaching_the_ledger_itself_is_refused_and_the_source_keeps_working(file_source, orders, tmp_path,
                                                                             monkeypatch, spelling):
    import os

    path = file_source.path
    if spelling == "relative":
        monkeypatch.chdir(os.path.dirname(path))
        path = os.path.basename(path)
    elif spelling == "symlink":
        link = tmp_path / "alias.sqlite"
        link.symlink_to(file_source.path)
        path = str(link)
    elif spelling == "uri":
        path = f"file:{file_source.path}?mode=ro"
    with file_source.transaction() as tx:
        with pytest.raises(ProtectedTableError, match="may not attach the ledger's own file"):
            tx.execute(f"ATTACH DATABASE '{path}' AS x")
        tx.execute("CREATE TABLE mine (x)")
    orders.append({"order_id": 2, "total": 20})  # the Source is not locked out of its own file
    with file_source.transaction() as tx:
        tx.execute("INSERT INTO mine VALUES (1)")
    assert orders.count() == 2
    assert [r[1] for r in file_source.ledger.conn.execute("PRAGMA database_list")] == ["main"]


def test_attaching_another_file_still_works(file_source, orders, tmp_path):
    other = tmp_path / "other.sqlite"
    with file_source.transaction() as tx:
        tx.execute("ATTACH DATABASE ? AS other", (str(other),))
    file_source.ledger.conn.execute("DETACH DATABASE other")

"""The caller's transaction (outbox), notifications and listeners, stream reads."""

from __future__ import annotations

import threading
import time

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import TransactionError


class Order(BaseModel):
    order_id: int
    total: int


def _orders_table(source):
    with source.transaction() as tx:
        tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL)")


def test_clean_exit_commits_business_row_appended_row_enqueued_job_and_notification(file_source):
    _orders_table(file_source)
    events = file_source.topic("order.events", Order, dedup=None)
    q = file_source.queue("emails", Order)
    listener = file_source.listen("orders", timeout=0)
    with file_source.transaction() as tx:
        tx.execute("INSERT INTO orders (id, total) VALUES (?, ?)", (1, 99))
        events.append({"order_id": 1, "total": 99}, tx=tx)
        q.enqueue({"order_id": 1, "total": 99}, tx=tx)
        tx.notify("orders", {"id": 1})
    assert [n.payload for n in listener] == [{"id": 1}]
    assert events.count() == 1 and q.stats()["pending"] == 1
    with file_source.transaction() as tx:
        assert tx.query("SELECT id, total FROM orders") == [{"id": 1, "total": 99}]


def test_rolled_back_transaction_drops_business_row_appended_row_and_notification_together(file_source):
    _orders_table(file_source)
    events = file_source.topic("order.events", Order, dedup=None)
    q = file_source.queue("emails", Order)
    listener = file_source.listen("orders", timeout=0)
    with pytest.raises(RuntimeError, match="payment declined"):
        with file_source.transaction() as tx:
            tx.execute("INSERT INTO orders (id, total) VALUES (?, ?)", (1, 99))
            events.append({"order_id": 1, "total": 99}, tx=tx)
            q.enqueue({"order_id": 1, "total": 99}, tx=tx)
            tx.notify("orders", {"id": 1})
            raise RuntimeError("payment declined")
    assert list(listener) == []
    assert events.count() == 0 and q.stats()["pending"] == 0
    with file_source.transaction() as tx:
        assert tx.query("SELECT count(*) AS n FROM orders") == [{"n": 0}]
        assert tx.query("SELECT count(*) AS n FROM _minikafka_notifications") == [{"n": 0}]


def test_nested_transaction_raises_a_clear_error_instead_of_deadlocking(file_source):
    with file_source.transaction():
        with pytest.raises(TransactionError, match="already open"):
            with file_source.transaction():
                pass
    with file_source.transaction() as tx:  # the Source stays usable
        assert tx.active


def test_library_writes_inside_a_transaction_still_nest_as_savepoints(file_source):
    topic = file_source.topic("order.events", Order, dedup=("order_id",))
    with file_source.transaction() as tx:
        topic.append({"order_id": 1, "total": 1}, tx=tx)
        with pytest.raises(Exception, match="already"):
            topic.append({"order_id": 1, "total": 2}, tx=tx)  # only this append rolls back
        topic.append({"order_id": 2, "total": 2})  # no tx= joins too: same Source, same connection
    assert [r.order_id for r in topic.iter_new()] == [1, 2]


def test_a_transaction_of_another_source_or_a_closed_one_is_refused(db_path, tmp_path):
    with Source(db_path) as a, Source(str(tmp_path / "other.sqlite")) as b:
        topic = a.topic("order.events", Order, dedup=None)
        with b.transaction() as foreign:
            with pytest.raises(TransactionError, match="belongs to Source"):
                topic.append({"order_id": 1, "total": 1}, tx=foreign)
        with a.transaction() as own:
            pass
        with pytest.raises(TransactionError, match="closed"):
            topic.append({"order_id": 1, "total": 1}, tx=own)
        with pytest.raises(TransactionError, match="closed"):
            foreign.execute("SELECT 1")
        assert topic.count() == 0


def test_transaction_control_sql_is_refused(file_source):
    with file_source.transaction() as tx:
        with pytest.raises(TransactionError, match="control"):
            tx.execute("COMMIT")


def test_listener_sees_only_notifications_committed_after_it_started(file_source):
    file_source.notify("ch", "old")
    listener = file_source.listen("ch", timeout=0)
    file_source.notify("other", "elsewhere")
    file_source.notify("ch", [1, 2])
    file_source.notify("ch", None)
    got = list(listener)
    assert [n.payload for n in got] == [[1, 2], None]
    assert all(n.channel == "ch" for n in got) and got[0].id < got[1].id


def test_listener_wakes_on_a_commit_in_another_thread(db_path):
    with Source(db_path) as source:
        listener = source.listen("ch", timeout=5)

        def later():
            time.sleep(0.05)
            with Source(db_path) as other:
                other.notify("ch", {"hello": "world"})

        t = threading.Thread(target=later)
        t.start()
        first = next(listener)
        t.join()
        assert first.payload == {"hello": "world"}


def test_listener_with_a_timeout_stops_when_nothing_arrives(file_source):
    assert list(file_source.listen("quiet", timeout=0.05)) == []


def test_prune_notifications_by_count_by_age_and_both(file_source):
    for i in range(10):
        file_source.notify("ch", i)
    assert file_source.prune_notifications() == 0
    assert file_source.prune_notifications(max_keep=4) == 6
    with file_source.transaction() as tx:
        assert [r["payload"] for r in tx.query("SELECT payload FROM _minikafka_notifications ORDER BY id")] == \
            ["6", "7", "8", "9"]
    with file_source._ledger.atomic() as conn:  # tx.execute may not write ledger tables: backdate directly
        conn.execute("UPDATE _minikafka_notifications SET created_at = '2000-01-01T00:00:00.000000Z' WHERE payload = '9'")
    assert file_source.prune_notifications(older_than=3600) == 1
    assert file_source.prune_notifications(older_than=3600, max_keep=1) == 2
    assert file_source.prune_notifications(max_keep=0) == 1
    with pytest.raises(ValueError, match="max_keep"):
        file_source.prune_notifications(max_keep=-1)


def test_read_since_is_a_stateless_page_of_the_log(file_source):
    topic = file_source.topic("order.events", Order, dedup=None)
    topic.extend([{"order_id": i, "total": i} for i in range(5)])
    page = topic.read_since(2, limit=2)
    assert [r.id for r in page] == [3, 4] and page[0].data.order_id == 2
    assert topic.read_since(5) == []
    assert [r.id for r in topic.read_since(0)] == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="offset"):
        topic.read_since(-1)

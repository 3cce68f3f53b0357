"""Reading a topic page by page (ledger/topics/browse.py): counts that take the fast id-range path agree with
the row-by-row definition of 'new' and lag, pages are id ranges, and a run's rows are found by time."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.ledger.topics import acks, browse, filters


class Item(BaseModel):
    n: int
    feed: str


def slow_new(conn, layout) -> int:
    where, params = acks.pending_filter(None, layout.name)
    return conn.execute(f"SELECT count(*) FROM {layout.table} WHERE {where}", params).fetchone()[0]


@pytest.mark.parametrize("partitions", [1, 3])
def test_new_count_and_lag_agree_with_the_row_by_row_definition(tmp_path, partitions):
    with Source(tmp_path / "l.sqlite") as source:
        items = source.topic("items", Item, dedup=None, partitions=partitions, key=("n",))
        layout = source.layout("items")
        conn = source.ledger.conn

        def check():
            counts = browse.topic_counts(conn, layout)
            assert counts["new"] == slow_new(conn, layout)
            assert counts["total"] == items.count() and counts["handled"] == items.count() - counts["new"]
            for name in acks.consumer_names(conn, "items"):
                cid = acks.find_consumer(conn, "items", name)
                assert browse.consumer_lag(conn, "items", cid) == acks.lag(conn, "items", cid)

        check()  # empty
        items.extend([{"n": i, "feed": f"f{i % 3}"} for i in range(60)])
        check()  # no consumer
        items.consumer("a")
        items.consumer("b")
        check()
        for i in range(1, 21):
            items.set_handled(i, consumer="a")  # in order: a's offset moves
        check()
        for i in (30, 31, 45):
            items.set_handled(i, consumer="a")  # out of order: the row-by-row path
            items.set_handled(i, consumer="b")
        check()
        items.set_handled(50)  # topic-wide, out of order
        check()


def test_pages_are_id_ranges_forward_and_back_with_a_filter(tmp_path):
    with Source(tmp_path / "l.sqlite") as source:
        items = source.topic("items", Item, dedup=None)
        items.extend([{"n": i, "feed": "even" if i % 2 == 0 else "odd"} for i in range(1, 101)])
        conn, layout = source.ledger.conn, source.layout("items")
        first = browse.row_page(conn, layout, limit=10)
        assert [r["_id"] for r in first.rows] == list(range(1, 11)) and first.newer and not first.older
        nxt = browse.row_page(conn, layout, after=first.last_id, limit=10)
        assert [r["_id"] for r in nxt.rows] == list(range(11, 21)) and nxt.older
        back = browse.row_page(conn, layout, before=nxt.first_id, limit=10)
        assert [r["_id"] for r in back.rows] == list(range(1, 11)) and not back.older and back.newer
        even = filters.where_clause(layout, ("feed=even",))
        last = browse.row_page(conn, layout, before=101, condition=even, limit=5)
        assert [r["n"] for r in last.rows] == [92, 94, 96, 98, 100] and last.older and not last.newer


def test_a_row_carries_its_status_for_every_consumer(tmp_path):
    with Source(tmp_path / "l.sqlite") as source:
        items = source.topic("items", Item, dedup=None)
        items.extend([{"n": i, "feed": "x"} for i in range(5)])
        items.consumer("a")
        items.consumer("b")
        items.set_handled(2, consumer="a")
        rows = browse.row_page(source.ledger.conn, source.layout("items")).rows
    assert [r["_consumers"] for r in rows[:3]] == [
        {"a": "new", "b": "new"}, {"a": "handled", "b": "new"}, {"a": "new", "b": "new"}]
    assert [r["_status"] for r in rows[:3]] == ["new", "new", "new"]


def test_ids_created_between_bisects_to_the_rows_of_a_time_span(tmp_path):
    with Source(tmp_path / "l.sqlite") as source:
        items = source.topic("items", Item, dedup=None)
        for i in range(40):
            items.append({"n": i, "feed": "x"})
        conn, layout = source.ledger.conn, source.layout("items")
        created = [r[0] for r in conn.execute('SELECT "_created_at" FROM "items" ORDER BY "_id"')]
        assert browse.ids_created_between(conn, layout, created[10], created[19], margin_s=0) == (11, 20)
        assert browse.ids_created_between(conn, layout, created[0], None, margin_s=0) == (1, 40)
        assert browse.ids_created_between(conn, layout, "2999-01-01T00:00:00.000000Z", None)[0] == 41

"""Reading a topic for a person (ledger/consuming/read_models.py, ledger/topics/browse.py): counts and lag
agree with the row-by-row definition of 'new' and lag, pages are id ranges chosen by a parsed filter, and a
run's rows are found by time."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.ledger.consuming import RowFilter, read_models
from minikafka.ledger.topics import acks, browse


class Item(BaseModel):
    n: int
    feed: str


def slow_new(conn, layout) -> int:
    where, params = acks.pending_filter(None, layout.name)
    return conn.execute(f"SELECT count(*) FROM {layout.table} WHERE {where}", params).fetchone()[0]


def slow_lag(conn, layout, cid) -> dict[int, int]:
    where, params = acks.pending_filter(cid, layout.name)
    return dict(conn.execute(f'SELECT "_partition", count(*) FROM {layout.table} WHERE {where} GROUP BY 1',
                             params).fetchall())


@pytest.mark.parametrize("partitions", [1, 3])
def test_new_count_and_lag_agree_with_the_row_by_row_definition(tmp_path, partitions):
    with Source(tmp_path / "l.sqlite") as source:
        items = source.topic("items", Item, dedup=None, partitions=partitions, key=("n",))
        layout = source.layout("items")
        conn = source.ledger.conn

        def check():
            overview = read_models.topic_overview(conn, layout)
            assert overview.new == slow_new(conn, layout)
            assert overview.total == items.count() and overview.handled == items.count() - overview.new
            assert overview.consumers == acks.consumer_names(conn, "items")
            for group in overview.groups:
                cid = acks.find_consumer(conn, "items", group.name)
                assert {p.partition: p.lag for p in group.partitions if p.lag} == slow_lag(conn, layout, cid)
                assert {p.partition: p.lag for p in group.partitions} == acks.lag(conn, "items", cid)

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
        first = read_models.row_page(conn, layout, limit=10)
        assert [r["_id"] for r in first.rows] == list(range(1, 11)) and first.newer and not first.older
        nxt = read_models.row_page(conn, layout, after=first.last_id, limit=10)
        assert [r["_id"] for r in nxt.rows] == list(range(11, 21)) and nxt.older
        back = read_models.row_page(conn, layout, before=nxt.first_id, limit=10)
        assert [r["_id"] for r in back.rows] == list(range(1, 11)) and not back.older and back.newer
        last = read_models.row_page(conn, layout, RowFilter(("feed=even",)), before=101, limit=5)
        assert [r["n"] for r in last.rows] == [92, 94, 96, 98, 100] and last.older and not last.newer


def test_a_row_filter_picks_rows_new_or_handled_as_one_consumer_sees_them(tmp_path):
    with Source(tmp_path / "l.sqlite") as source:
        items = source.topic("items", Item, dedup=None)
        items.extend([{"n": i, "feed": "even" if i % 2 == 0 else "odd"} for i in range(1, 11)])
        items.consumer("a")
        for i in (2, 3, 4):
            items.set_handled(i, consumer="a")
        conn, layout = source.ledger.conn, source.layout("items")
        cid = acks.find_consumer(conn, "items", "a")
        done = read_models.row_page(conn, layout, RowFilter((), "handled", cid)).rows
        assert [r["_id"] for r in done] == [2, 3, 4]
        pending_even = read_models.row_page(conn, layout, RowFilter(("feed=even",), "new", cid)).rows
        assert [r["_id"] for r in pending_even] == [6, 8, 10]
        selected = read_models.row_select(conn, layout, RowFilter((), "new", cid), status_for=(cid,))
        assert [(r[0], r[-1]) for r in selected.after(0, 3)] == [(1, "new"), (5, "new"), (6, "new")]
        with pytest.raises(ValueError, match="new or handled"):
            RowFilter((), "done", cid).condition(layout)


def test_a_row_carries_its_status_for_every_consumer(tmp_path):
    with Source(tmp_path / "l.sqlite") as source:
        items = source.topic("items", Item, dedup=None)
        items.extend([{"n": i, "feed": "x"} for i in range(5)])
        items.consumer("a")
        items.consumer("b")
        items.set_handled(2, consumer="a")
        rows = read_models.row_page(source.ledger.conn, source.layout("items")).rows
    assert [r["_consumers"] for r in rows[:3]] == [
        {"a": "new", "b": "new"}, {"a": "handled", "b": "new"}, {"a": "new", "b": "new"}]
    assert [r["_status"] for r in rows[:3]] == ["new", "new", "new"]


def test_a_processing_job_whose_lease_expired_reads_as_pending():
    assert read_models.job_state("processing", 1_000, now_ms=1_000) == "pending"
    assert read_models.job_state("processing", 1_001, now_ms=1_000) == "processing"
    assert read_models.job_state("processing", None, now_ms=1_000) == "processing"
    assert read_models.job_state("dead", 10, now_ms=1_000) == "dead"


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

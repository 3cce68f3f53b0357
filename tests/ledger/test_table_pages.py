"""TopicTable's page back from an id and its bisection step: what the console's row browser
and its search for a run's rows read through."""

from __future__ import annotations

from pydantic import BaseModel

from minikafka import Source
from minikafka.ledger.topics import TopicTable


class Item(BaseModel):
    n: int


def test_a_page_before_an_id_is_the_last_rows_below_it_in_id_order(tmp_path):
    with Source(tmp_path / "l.sqlite") as source:
        source.topic("items", Item, dedup=None).extend([{"n": i} for i in range(1, 31)])
        table = TopicTable(source.ledger.conn, source.layout("items"))
        assert [r[0] for r in table.page_before(21, 5)] == [16, 17, 18, 19, 20]
        assert [r[0] for r in table.page_before(4, 5)] == [1, 2, 3]
        assert [r[0] for r in table.page_before(31, 3, '"n" % 2 = ?', (0,))] == [26, 28, 30]
        assert table.page_before(1, 5) == []


def test_first_from_gives_the_id_and_creation_time_of_the_first_row_at_or_above(tmp_path):
    with Source(tmp_path / "l.sqlite") as source:
        source.topic("items", Item, dedup=None).extend([{"n": i} for i in range(5)])
        table = TopicTable(source.ledger.conn, source.layout("items"))
        first = table.first_from(3)
        assert first[0] == 3 and first[1].endswith("Z")
        assert table.first_from(6) is None

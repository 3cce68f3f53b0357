"""A lookup's bounds: the rows a stage's lookup reads, fixed in its plan's transaction."""

from __future__ import annotations

from pydantic import BaseModel

from minikafka import Source
from minikafka.ledger.topics import lookup_bounds, lookup_subquery


class Airline(BaseModel):
    carrier: str
    name: str


def read(src: Source, topic: str, bounds) -> list[tuple]:
    """What the JDBC read of the bounds returns (the subquery, run on the ledger)."""
    query = lookup_subquery(src.layout(topic), bounds)
    return sorted(src.ledger.conn.execute(f"SELECT carrier, name FROM {query}").fetchall())


def test_a_topic_lookup_reads_every_row_up_to_its_high_water_id_and_not_later_ones(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        airlines = src.topic("airlines", Airline, dedup="carrier")
        airlines.extend([{"carrier": "AA", "name": "American"}, {"carrier": "UA", "name": "United"}])
        with src.ledger.atomic() as conn:
            bounds = lookup_bounds(conn, src.layout("airlines"))
        airlines.append({"carrier": "DL", "name": "Delta"})  # after the plan
        assert (bounds.upto, bounds.rows, bounds.table) == (2, 2, False)
        assert read(src, "airlines", bounds) == [("AA", "American"), ("UA", "United")]


def test_a_table_lookup_reads_the_versions_current_as_of_its_high_water_id(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        table = src.table("carriers", Airline, key="carrier")
        table.upsert_many([{"carrier": "AA", "name": "American"}, {"carrier": "UA", "name": "Uni"}])
        table.upsert({"carrier": "UA", "name": "United"})  # version 3 supersedes version 2
        with src.ledger.atomic() as conn:
            bounds = lookup_bounds(conn, src.layout("carriers"))
        table.upsert({"carrier": "AA", "name": "Later"})  # supersedes version 1 after the plan
        assert (bounds.upto, bounds.rows, bounds.table) == (3, 2, True)
        assert read(src, "carriers", bounds) == [("AA", "American"), ("UA", "United")]
        with src.ledger.atomic() as conn:
            now = lookup_bounds(conn, src.layout("carriers"))
        assert (now.upto, now.rows) == (4, 2) and read(src, "carriers", now) == [("AA", "Later"), ("UA", "United")]


def test_an_empty_lookup_has_no_rows(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        src.topic("airlines", Airline, dedup="carrier")
        with src.ledger.atomic() as conn:
            bounds = lookup_bounds(conn, src.layout("airlines"))
        assert (bounds.upto, bounds.rows) == (0, 0) and read(src, "airlines", bounds) == []

"""Topic names SQLite or the ledger keeps for itself are refused by name validation."""

from __future__ import annotations

import pytest

from minikafka.errors import InvalidNameError
from minikafka.ledger.topics import validate_topic_name
from tests.conftest import Video


@pytest.mark.parametrize("name", ["sqlite_foo", "SQLite_items", "SQLITE_", "sqlite_master", "sqlite", "SQLite"])
def test_topic_names_starting_with_sqlite_are_reserved_in_any_case(source, name):
    with pytest.raises(InvalidNameError, match="reserves names starting with 'sqlite_'"):
        source.topic(name, Video, dedup=None)
    assert source._ledger.conn.execute(
        "SELECT count(*) FROM _minikafka_topics WHERE name = ?", (name,)).fetchone()[0] == 0


@pytest.mark.parametrize("name", ["_minikafka_topics", "_MiniKafka_x"])
def test_topic_names_starting_with_minikafka_tables_prefix_are_reserved(name):
    with pytest.raises(InvalidNameError, match="invalid topic name"):
        validate_topic_name(name)


@pytest.mark.parametrize("name", ["sqlitefoo", "my.sqlite_items", "sqlite3", "sqlite.items"])
def test_names_merely_containing_sqlite_stay_valid(source, name):
    assert validate_topic_name(name) == name
    source.topic(name, Video, dedup=None).append({"creator": "a", "url": "u", "length_seconds": 1})

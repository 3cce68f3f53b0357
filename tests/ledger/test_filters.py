"""ledger.topics.filters: FIELD OP VALUE checked against the topic's columns, values as parameters."""

from __future__ import annotations

import enum

import pytest
from pydantic import BaseModel

from minikafka.ledger.topics import InvalidFilterError, where_clause
from minikafka.ledger.topics.filters import parse_condition


class Color(enum.Enum):
    red = "red"
    blue = "blue"


class Thing(BaseModel):
    name: str
    n: int
    ok: bool
    color: Color
    tags: list[str] = []


@pytest.fixture
def things(source):
    t = source.topic("things", Thing, dedup=None)
    t.extend([{"name": "a b", "n": 1, "ok": True, "color": "red"},
              {"name": "O'Brien", "n": 2, "ok": False, "color": "blue", "tags": ["x"]}])
    return t


def _ids(source, layout, *filters):
    sql, params = where_clause(layout, filters)
    return [r[0] for r in source._ledger.conn.execute(f'SELECT "_id" FROM {layout.table} WHERE {sql}', params)]


def test_filters_convert_values_to_the_column_type(source, things):
    layout = source.layout("things")
    assert _ids(source, layout, "n>1") == [2]
    assert _ids(source, layout, "ok=true") == [1]
    assert _ids(source, layout, "color = blue") == [2]
    assert _ids(source, layout, "name = O'Brien") == [2]
    assert _ids(source, layout, "name='a b'") == [1]
    assert _ids(source, layout, "_id>=2", "n<=2") == [2]


def test_filter_values_are_parameters_never_sql(source, things):
    layout = source.layout("things")
    cond = parse_condition(layout, "name = x' OR 1=1 --")
    assert cond.sql() == ('"name" = ?', ("x' OR 1=1 --",))
    assert _ids(source, layout, "name = x' OR 1=1 --") == []


@pytest.mark.parametrize("text, message", [
    ("n", "FIELD OP VALUE"),
    ("missing=1", "no column 'missing'"),
    ("n=one", "not a valid int"),
    ("ok=maybe", "not a valid bool"),
    ("color=green", "expected one of"),
    ("tags>1", "does not apply"),
    ("n~1", "needs a text column"),
    ("n>null", "only = and !="),
])
def test_bad_filters_raise_a_clear_error(source, things, text, message):
    with pytest.raises(InvalidFilterError, match=message):
        parse_condition(source.layout("things"), text)

"""Names that become SQL identifiers are validated and always quoted."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from minikafka import InvalidNameError
from minikafka.ledger.topics import quote_identifier
from tests.conftest import Video


@pytest.mark.parametrize("name", ['a"b', "a b", "[x]", "", "1abc", "_private", "x;DROP TABLE y", "é", "a" * 129])
def test_bad_topic_names_are_refused_with_the_rule(source, name):
    with pytest.raises(InvalidNameError, match="invalid topic name"):
        source.topic(name, Video, dedup=None)


@pytest.mark.parametrize("name", ["rss.items", "a-b", "A1_b.c-d", "select", "order"])
def test_good_topic_names_work_even_sql_keywords(source, name):
    t = source.topic(name, Video, dedup=("url",))
    t.append({"creator": "c", "url": "u", "length_seconds": 1})
    assert t.count() == 1


def test_quote_identifier_escapes_quotes_and_refuses_nul():
    assert quote_identifier('we"ird name]') == '"we""ird name]"'
    with pytest.raises(InvalidNameError):
        quote_identifier("a\x00b")


def test_field_names_are_validated(source):
    class Aliased(BaseModel):
        ok: int = Field(alias="my field")

    assert source.topic("aliased", Aliased, dedup=None).layout.field_names == ["ok"]

    class Clash(BaseModel):
        url: str
        URL: str

    with pytest.raises(InvalidNameError, match="differ only in case"):
        source.topic("clash", Clash, dedup=None)


def test_topic_names_are_case_insensitive(source):
    source.topic("items", Video, dedup=None)
    with pytest.raises(InvalidNameError, match="case-insensitive"):
        source.topic("Items", Video, dedup=None)


def test_topic_cannot_shadow_an_internal_or_foreign_table(source):
    source._ledger.conn.execute("CREATE TABLE mine (x)")
    with pytest.raises(InvalidNameError, match="clashes with existing table"):
        source.topic("mine", Video, dedup=None)

"""Reopening topics: compatible models pass, anything else raises before a write."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from minikafka import SchemaMismatchError, Source
from tests.conftest import Video


class VideoRenamed(BaseModel):
    """Same fields, another class name and docstring."""

    creator: str
    url: str
    length_seconds: int


class VideoWider(BaseModel):
    creator: str
    url: str
    length_seconds: float


class VideoMore(BaseModel):
    creator: str
    url: str
    length_seconds: int
    extra: str = ""


def test_reopen_with_same_shape_is_allowed(db_path):
    with Source(db_path) as src:
        src.topic("videos", Video, dedup=("url",)).append({"creator": "c", "url": "u", "length_seconds": 1})
    with Source(db_path) as src:
        t = src.topic("videos", VideoRenamed, dedup=["url"])
        assert next(t.iter_new()).creator == "c"


@pytest.mark.parametrize("model, match", [
    (VideoWider, r"field 'length_seconds' changed \(kind, sql_type\)"),
    (VideoMore, r"field 'extra' added"),
])
def test_reopen_with_another_model_raises(db_path, model, match):
    with Source(db_path) as src:
        src.topic("videos", Video, dedup=("url",))
    with Source(db_path) as src:
        with pytest.raises(SchemaMismatchError, match=match):
            src.topic("videos", model, dedup=("url",))


def test_constraint_changes_are_incompatible(source):
    class Strict(BaseModel):
        creator: str = Field(min_length=3)
        url: str
        length_seconds: int

    source.topic("videos", Video, dedup=None)
    with pytest.raises(SchemaMismatchError, match="schema differs"):
        source.topic("videos", Strict, dedup=None)


def test_reopen_with_other_dedup_raises(source):
    source.topic("videos", Video, dedup=("url",))
    with pytest.raises(SchemaMismatchError, match="dedup fields differ"):
        source.topic("videos", Video, dedup=("creator",))
    with pytest.raises(SchemaMismatchError, match="dedup fields differ"):
        source.topic("videos", Video, dedup=None)


def test_dedup_field_missing_from_model_raises_before_writing(source):
    with pytest.raises(SchemaMismatchError, match=r"\['nope'\]"):
        source.topic("videos", Video, dedup=("nope",))
    assert source.topics() == []


def test_non_model_is_refused(source):
    with pytest.raises(TypeError, match="BaseModel"):
        source.topic("x", dict, dedup=None)

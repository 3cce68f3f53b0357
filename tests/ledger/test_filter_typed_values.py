"""ledger.topics.filters: a filter value becomes the form the ledger stores, or a clear error."""

from __future__ import annotations

import uuid
from datetime import date, datetime, time, timezone
from decimal import Decimal

import pytest
from pydantic import BaseModel

from minikafka.ledger.topics import InvalidFilterError, where_clause

U1 = uuid.UUID("12345678-1234-5678-1234-567812345678")


class Post(BaseModel):
    published: datetime
    day: date
    at: time
    price: Decimal
    ref: uuid.UUID
    seen: datetime | None = None


def _at(minute: int) -> datetime:
    return datetime(2025, 1, 1, 0, minute, tzinfo=timezone.utc)


@pytest.fixture
def posts(source):
    t = source.topic("posts", Post, dedup=None)
    t.extend([
        {"published": _at(2), "day": date(2025, 1, 1), "at": time(0, 2), "price": Decimal("1.50"), "ref": U1},
        {"published": _at(3), "day": date(2025, 1, 2), "at": time(0, 3), "price": Decimal("2"),
         "ref": uuid.uuid4(), "seen": _at(3)},
        {"published": datetime(2025, 1, 1, 0, 3, 0, 1, tzinfo=timezone.utc), "day": date(2025, 1, 3),
         "at": time(0, 3, 0, 500), "price": Decimal("-0.0"), "ref": uuid.uuid4()},
    ])
    return source.layout("posts")


def _ids(source, layout, *filters):
    sql, params = where_clause(layout, filters)
    return [r[0] for r in source._ledger.conn.execute(f'SELECT "_id" FROM {layout.table} WHERE {sql}', params)]


def test_stored_datetimes_have_one_fixed_width_so_text_order_is_time_order(source, posts):
    stored = [r[0] for r in source._ledger.conn.execute(f'SELECT "published" FROM {posts.table}')]
    assert stored[1] == "2025-01-01T00:03:00.000000Z"
    assert {len(s) for s in stored} == {27}


@pytest.mark.parametrize("value", ["2025-01-01T00:03:00Z", "2025-01-01 00:03:00+00:00", "2025-01-01T01:03:00+01:00",
                                   "2025-01-01T00:03:00", "2025-01-01T00:03:00.000000Z", "2024-12-31T19:03-05:00"])
def test_datetime_filter_matches_every_iso_spelling_of_the_stored_instant(source, posts, value):
    assert _ids(source, posts, f"published={value}") == [2]


def test_datetime_filter_orders_by_time_not_by_raw_text(source, posts):
    assert _ids(source, posts, "published<2025-01-01T00:03:00Z") == [1]
    assert _ids(source, posts, "published>=2025-01-01T00:03:00Z") == [2, 3]
    assert _ids(source, posts, "published>2025-01-01T00:03:00Z") == [3]
    assert _ids(source, posts, "published<=2025-01-01T01:03:00+01:00") == [1, 2]
    assert _ids(source, posts, "published>=2025-01-01") == [1, 2, 3]  # a date alone is midnight UTC


def test_metadata_timestamps_filter_as_datetimes(source, posts):
    assert _ids(source, posts, "_created_at>2000-01-01T00:00:00+00:00") == [1, 2, 3]
    assert _ids(source, posts, "_created_at<2000-01-01") == []
    with pytest.raises(InvalidFilterError, match="ISO 8601"):
        _ids(source, posts, "_created_at>yesterday")


def test_nullable_datetime_filter_converts_too(source, posts):
    assert _ids(source, posts, "seen=2025-01-01T01:03:00+01:00") == [2]
    assert _ids(source, posts, "seen=null") == [1, 3]


def test_date_time_uuid_filters_use_the_stored_form(source, posts):
    assert _ids(source, posts, "day>=2025-01-02") == [2, 3]
    assert _ids(source, posts, "day=20250103") == [3]
    assert _ids(source, posts, "at=00:03") == [2]
    assert _ids(source, posts, "at>00:03:00") == [3]
    assert _ids(source, posts, f"ref={str(U1).upper()}") == [1]


def test_decimal_filter_compares_by_value_not_scale(source, posts):
    assert _ids(source, posts, "price=1.5") == [1]
    assert _ids(source, posts, "price=1.500") == [1]
    assert _ids(source, posts, "price=2.0") == [2]
    assert _ids(source, posts, "price=0") == [3]
    assert _ids(source, posts, "price!=1.5") == [2, 3]


@pytest.mark.parametrize("text, accepted", [
    ("published>garbage", "ISO 8601 date-time"),
    ("published=2025-13-01", "ISO 8601 date-time"),
    ("day=2025-01-01T00:00:00Z", "ISO 8601 date"),
    ("at=noon", "ISO 8601 time"),
    ("ref=nope", "a UUID"),
    ("price=abc", "a decimal number"),
    ("price=NaN", "a decimal number"),
    ("price>1", "use = or !="),
    ("_status=done", "new or handled"),
    ("_status>new", "use = or !="),
    ("_id=1.5", "whole number"),
    ("_id=99999999999999999999", "64-bit"),
])
def test_a_value_the_column_cannot_hold_is_refused_naming_it_and_what_is_accepted(source, posts, text, accepted):
    with pytest.raises(InvalidFilterError, match=accepted) as info:
        _ids(source, posts, text)
    value = text.split("=" if "=" in text else ">")[-1]
    assert repr(value) in str(info.value) or accepted.startswith("use")


def test_float_filter_refuses_nan(source):
    class Scored(BaseModel):
        score: float

    t = source.topic("scored", Scored, dedup=None)
    t.extend([{"score": 0.5}, {"score": float("inf")}])
    layout = source.layout("scored")
    with pytest.raises(InvalidFilterError, match="not NaN"):
        _ids(source, layout, "score=nan")
    assert _ids(source, layout, "score>1e300") == [2]


def test_status_filter_reads_the_status_show_prints(source, posts):
    t = source.topic("posts", Post, dedup=None)
    t.set_handled(2)
    assert _ids(source, posts, "_status=handled") == [2]
    assert _ids(source, posts, "_status=new") == [1, 3]
    assert _ids(source, posts, "_status!=new") == [2]
    assert _ids(source, posts, "_status != handled") == [1, 3]

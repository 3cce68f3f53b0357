"""The type mapping, both ways: what SQLite stores and what comes back."""

from __future__ import annotations

import enum
import math
import sqlite3
import uuid
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from minikafka import InvalidRecordError, Source, UnsupportedTypeError


class Color(str, enum.Enum):
    red = "red"
    green = "green"


class Level(enum.IntEnum):
    low = 1
    high = 2


class Inner(BaseModel):
    name: str
    tags: list[str]


class Everything(BaseModel):
    i: int
    f: float
    s: str
    b: bool
    dt: datetime
    d: date
    dec: Decimal
    color: Color
    level: Level
    lit: Literal["a", "b"]
    uid: uuid.UUID
    raw: bytes
    inner: Inner
    items: list[int]
    mapping: dict[str, float]
    opt_i: int | None = None
    opt_inner: Inner | None = None
    union: int | str = 0


EXPECTED_SQL = {
    "i": "INTEGER", "f": "REAL", "s": "TEXT", "b": "INTEGER", "dt": "TEXT", "d": "TEXT",
    "dec": "TEXT", "color": "TEXT", "level": "INTEGER", "lit": "TEXT", "uid": "TEXT",
    "raw": "BLOB", "inner": "TEXT", "items": "TEXT", "mapping": "TEXT", "opt_i": "INTEGER",
    "opt_inner": "TEXT", "union": "TEXT",
}


def sample(**over) -> dict:
    base = dict(
        i=2**63 - 1, f=-0.5, s="héllo \U0001F600 \x00 end", b=True,
        dt=datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=timezone.utc),
        d=date(1, 1, 1), dec=Decimal("12345678901234567890.123456789"), color=Color.green,
        level=Level.high, lit="b", uid=uuid.UUID(int=7), raw=b"\x00\xff",
        inner=Inner(name="n", tags=["x", ""]), items=[1, -2], mapping={"k": 1.5},
    )
    base.update(over)
    return base


@pytest.fixture
def topic(source):
    return source.topic("everything", Everything, dedup=None)


def test_each_field_gets_its_strict_sqlite_column_type(source, topic):
    info = {r[1]: (r[2], r[3]) for r in source._ledger.conn.execute('PRAGMA table_info("everything")')}
    assert {k: v[0] for k, v in info.items() if not k.startswith("_")} == EXPECTED_SQL
    assert info["i"][1] == 1 and info["opt_i"][1] == 0  # NOT NULL unless Optional
    sql = source._ledger.conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'everything'").fetchone()[0]
    assert sql.rstrip().endswith("STRICT")


def test_every_type_round_trips_exactly(topic):
    original = Everything(**sample())
    topic.append(original)
    back = next(topic.iter_new())
    assert back == original
    assert back.dt.microsecond == 999999 and back.dt.tzinfo is not None
    assert back.dec == Decimal("12345678901234567890.123456789")
    assert isinstance(back.color, Color) and back.level is Level.high


def test_stored_values_are_typed_not_json_blobs(source, topic):
    topic.append(sample())
    row = source._ledger.conn.execute(
        'SELECT typeof(i), i, typeof(f), typeof(b), b, dt, d, dec, color, level, typeof(raw), inner FROM "everything"'
    ).fetchone()
    assert row == (
        "integer", 2**63 - 1, "real", "integer", 1, "2024-02-29T23:59:59.999999Z", "0001-01-01",
        "12345678901234567890.123456789", "green", 2, "blob", '{"name":"n","tags":["x",""]}',
    )


def test_aware_datetimes_are_stored_in_utc_and_naive_ones_taken_as_utc(source, topic):
    plus2 = timezone(timedelta(hours=2))
    topic.append(sample(dt=datetime(2024, 1, 1, 2, 0, 0, 1, tzinfo=plus2)))
    topic.append(sample(dt=datetime(2024, 1, 1, 0, 0, 0, 2), uid=uuid.UUID(int=8)))
    stored = [r[0] for r in source._ledger.conn.execute('SELECT dt FROM "everything" ORDER BY "_id"')]
    assert stored == ["2024-01-01T00:00:00.000001Z", "2024-01-01T00:00:00.000002Z"]
    first = next(topic.iter_new())
    assert first.dt == datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc)


def test_int64_limits_pass_and_beyond_is_refused_naming_the_field(topic):
    topic.append(sample(i=-(2**63)))
    with pytest.raises(InvalidRecordError, match=r"'i'.*64-bit"):
        topic.append(sample(i=2**63))
    assert topic.count() == 1


def test_infinity_round_trips_and_nan_is_refused(topic):
    topic.append(sample(f=math.inf))
    assert next(topic.iter_new()).f == math.inf
    with pytest.raises(InvalidRecordError, match=r"field 'f'.*NaN"):
        topic.append(sample(f=math.nan))
    with pytest.raises(ValidationError):  # pydantic refuses non-finite Decimals itself
        topic.append(sample(dec=Decimal("NaN")))
    assert topic.count() == 1


def test_optional_fields_store_null(source, topic):
    topic.append(sample(opt_i=None, opt_inner=None))
    topic.append(sample(opt_i=5, opt_inner=Inner(name="x", tags=[])))
    got = list(topic.iter_new())
    assert got[0].opt_i is None and got[0].opt_inner is None
    assert got[1].opt_i == 5 and got[1].opt_inner.name == "x"


def test_the_database_rejects_wrong_types_written_behind_our_back(source, topic):
    conn = source._ledger.conn
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute('INSERT INTO "everything" ("_created_at", i) VALUES (\'x\', \'not an int\')')
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        conn.execute(
            'INSERT INTO "everything" ("_created_at", i, f, s, b, dt, d, dec, color, level, lit, uid, raw, inner,'
            " items, mapping, \"union\") VALUES ('x', 1, 1.0, 's', 1, 'yesterday', '2024-01-01', '1', 'red', 1, 'a',"
            " 'u', x'00', '{}', '[]', '{}', '0')"
        )


def test_decimal_constraints_are_kept_for_spark(source):
    class Price(BaseModel):
        amount: Decimal = Field(max_digits=12, decimal_places=4)

    t = source.topic("prices", Price, dedup=None)
    col = t.layout.column("amount")
    assert (col.max_digits, col.decimal_places) == (12, 4)
    t.append({"amount": "0.0001"})
    assert next(t.iter_new()).amount == Decimal("0.0001")


def test_unsupported_field_type_is_named(source):
    class Weird:
        pass

    class Bad(BaseModel):
        model_config = {"arbitrary_types_allowed": True}
        thing: Weird

    with pytest.raises(UnsupportedTypeError, match="thing"):
        source.topic("bad", Bad, dedup=None)


def test_invalid_payloads_raise_pydantic_errors_and_store_nothing(topic):
    with pytest.raises(ValidationError, match="i"):
        topic.append(sample(i="not a number"))
    bad = sample()
    del bad["s"]
    with pytest.raises(ValidationError, match="s"):
        topic.append(bad)
    assert topic.count() == 0


class Flat(BaseModel):
    i: int
    f: float
    s: str
    b: bool
    dt: datetime
    dec: Decimal
    opt: str | None


@settings(max_examples=150, deadline=None)
@given(
    i=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    f=st.floats(allow_nan=False),
    s=st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    b=st.booleans(),
    dt=st.datetimes(timezones=st.just(timezone.utc)),
    # what an unconstrained Decimal column holds: decimal(38, 18) (tests/ledger/test_unstorable_values.py)
    dec=st.one_of(*(st.decimals(min_value=-(10**20) + 1, max_value=10**20 - 1, places=p) for p in (0, 3, 18))),
    opt=st.none() | st.text(max_size=5),
)
def test_round_trip_property(i, f, s, b, dt, dec, opt):
    value = Flat(i=i, f=f, s=s, b=b, dt=dt, dec=dec, opt=opt)
    with Source(":memory:") as src:
        t = src.topic("flat", Flat, dedup=None)
        t.append(value)
        back = next(t.iter_new())
    assert back == value
    assert str(back.dec) == str(dec) or back.dec == dec

"""Values the ledger cannot store faithfully are refused at append, on every Python path.

NaN/infinity inside JSON columns (pydantic would write null, which the model then cannot
read back), NaN in float columns, and Decimals outside their column's decimal(P, S).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from minikafka import InvalidRecordError, MigrationError, Source
from minikafka.connectors.ingest import ingest_jsonl
from tests.cli.helpers import invoke


class Inner(BaseModel):
    ratio: float


class Reading(BaseModel):
    key: str
    scores: list[float] = []
    meta: dict[str, float] = {}
    inner: Inner | None = None
    anything: Any | None = None
    either: int | float = 0
    level: float = 0.0


class Price(BaseModel):
    key: str
    amount: Decimal


class Priced(BaseModel):
    key: str
    amount: Decimal = Field(max_digits=12, decimal_places=4)


@pytest.fixture
def readings(source):
    return source.topic("readings", Reading, dedup=("key",))


def refused(topic, **fields):
    with pytest.raises(InvalidRecordError) as info:
        topic.append({"key": "k", **fields})
    assert topic.count() == 0
    return str(info.value)


def test_nan_inside_a_list_field_is_refused_at_append(readings):
    message = refused(readings, scores=[1.0, 2.0, math.nan])
    assert "topic 'readings', field 'scores': scores[2] is NaN" in message and "JSON" in message


def test_infinity_inside_a_dict_field_is_refused_naming_the_key(readings):
    assert "meta.ratio is Infinity" in refused(readings, meta={"ok": 1.0, "ratio": math.inf})
    assert 'meta["a b"] is -Infinity' in refused(readings, meta={"a b": -math.inf})


def test_nan_inside_an_optional_nested_model_is_refused(readings):
    assert "inner.ratio is NaN" in refused(readings, inner={"ratio": math.nan})


def test_nan_inside_an_any_field_is_refused(readings):
    assert 'anything.xs[1] is NaN' in refused(readings, anything={"xs": [0, math.nan]})
    assert "anything is Infinity" in refused(readings, anything=math.inf)


def test_nan_in_a_union_field_stored_as_json_is_refused(readings):
    assert "either is NaN" in refused(readings, either=math.nan)


def test_none_and_finite_floats_inside_json_fields_are_stored_and_read_back(readings):
    readings.append({"key": "k", "scores": [0.5, -1e308], "meta": {"a": 0.0}, "inner": None,
                     "anything": {"x": None, "y": [1.5, "null"]}})
    back = next(readings.iter_new())
    assert back.scores == [0.5, -1e308] and back.inner is None and back.anything == {"x": None, "y": [1.5, "null"]}


def test_top_level_float_keeps_infinity_and_refuses_nan(readings):
    readings.append({"key": "inf", "level": math.inf})
    assert next(readings.iter_new()).level == math.inf
    with pytest.raises(InvalidRecordError, match=r"field 'level': value NaN: SQLite stores NaN as NULL"):
        readings.append({"key": "nan", "level": math.nan})
    assert readings.count() == 1


def test_append_many_with_one_nan_row_writes_nothing(readings):
    rows = [{"key": "a", "scores": [1.0]}, {"key": "b", "meta": {"r": math.nan}}, {"key": "c"}]
    with pytest.raises(InvalidRecordError, match=r"topic 'readings', row 1, field 'meta': meta\.r is NaN"):
        readings.extend(rows)
    assert readings.count() == 0


def test_a_transaction_with_a_nan_append_writes_nothing(source, readings):
    with pytest.raises(InvalidRecordError, match=r"scores\[0\] is NaN"):
        with source.transaction() as tx:
            readings.append({"key": "a"}, tx=tx)
            readings.append({"key": "b", "scores": [math.nan]}, tx=tx)
    assert readings.count() == 0


def test_pipe_output_with_nan_in_a_json_field_is_refused_and_the_input_stays_new(source, readings):
    class Raw(BaseModel):
        key: str
        value: float

    raw = source.topic("raw", Raw, dedup=("key",))
    raw.extend([{"key": "a", "value": 1.0}, {"key": "b", "value": math.inf}])
    with pytest.raises(InvalidRecordError, match=r"scores\[0\] is Infinity"):
        raw.pipe(lambda r: {"key": r.key, "scores": [r.value]}).to(readings).run()
    assert [r.key for r in readings.iter_new()] == ["a"]
    assert [r.key for r in raw.iter_new()] == ["b"]


def test_migrate_producing_nan_in_a_json_field_changes_nothing(source):
    class Old(BaseModel):
        key: str
        level: float = 0.0

    old = source.topic("readings", Old, dedup=("key",))
    old.extend([{"key": "a", "level": 1.0}, {"key": "b", "level": math.inf}])
    with pytest.raises(MigrationError, match=r"scores\[0\] is Infinity"):
        old.migrate(Reading, lambda r: {"key": r.key, "scores": [r.level]})
    assert [r.level for r in old.iter_new()] == [1.0, math.inf]


def test_stream_append_with_nan_is_refused(source):
    stream = source.stream("events")
    with pytest.raises(InvalidRecordError, match=r"is NaN"):
        stream.append({"x": [math.nan]})
    assert stream.count() == 0


def test_ingest_quarantines_a_line_with_infinity_in_a_dict_field(source, readings, tmp_path):
    feed = tmp_path / "feed.jsonl"
    feed.write_text('{"key": "a", "meta": {"r": 1.5}}\n{"key": "b", "meta": {"r": Infinity}}\n'
                    '{"key": "c", "scores": [NaN]}\n')
    result = ingest_jsonl(readings, feed)
    assert (result.lines, result.appended, result.quarantined) == (3, 1, 2)
    assert [r.key for r in readings.iter_new()] == ["a"]
    reasons = {q["origin"]: q["reason"] for q in source.quarantined("readings")}
    assert "meta.r is Infinity" in reasons["feed.jsonl:2"] and "scores[0] is NaN" in reasons["feed.jsonl:3"]


def test_ingest_command_quarantines_a_line_with_nan_in_a_list_field(db_path):
    out = invoke("ingest", "--create", "--source", db_path, "--model", "tests.ledger.test_unstorable_values:Reading",
                 "--dedup", "key", "readings", "-", input='{"key": "a"}\n{"key": "b", "scores": [1, NaN]}\n')
    assert out.exit_code == 0, out.output
    assert "2 lines, 1 appended, 0 duplicates, 1 quarantined" in out.output
    with Source(db_path) as src:
        assert [r.key for r in src.topic("readings", Reading, dedup=("key",)).iter_new()] == ["a"]
        [q] = src.quarantined("readings")
        assert q["origin"] == "<stdin>:2" and "scores[1] is NaN" in q["reason"]


def test_decimal_beyond_38_digits_is_refused(source):
    prices = source.topic("prices", Price, dedup=("key",))
    with pytest.raises(InvalidRecordError, match=r"field 'amount': value 1E\+400 does not fit .*decimal\(38, 18\)"):
        prices.append({"key": "a", "amount": Decimal("1E+400")})
    with pytest.raises(InvalidRecordError, match="does not fit"):
        prices.append({"key": "b", "amount": Decimal("1" * 39)})
    assert prices.count() == 0


def test_decimal_with_more_places_or_whole_digits_than_its_column_is_refused(source):
    prices = source.topic("prices", Price, dedup=("key",))
    for text in ("0." + "1" * 19, "1" + "0" * 20):
        with pytest.raises(InvalidRecordError, match="at most 20 digits before the point and 18 after"):
            prices.append({"key": text, "amount": Decimal(text)})
    assert prices.count() == 0


def test_non_finite_decimals_are_refused(source):
    prices = source.topic("prices", Price, dedup=("key",))
    for text in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises((ValidationError, InvalidRecordError)):
            prices.append({"key": text, "amount": Decimal(text)})
    assert prices.count() == 0


def test_decimals_the_column_holds_are_stored_exactly_and_export_to_arrow(source):
    prices = source.topic("prices", Price, dedup=("key",))
    values = ["12345678901234567890.123456789012345678", "-0.000000000000000001", "1.500000000000000000000", "0"]
    prices.extend([{"key": str(i), "amount": Decimal(v)} for i, v in enumerate(values)])
    assert [r.amount for r in prices.iter_new()] == [Decimal(v) for v in values]
    table = prices.to_arrow()
    assert str(table.schema.field("amount").type) == "decimal128(38, 18)"
    assert table.column("amount").to_pylist() == [Decimal(v) for v in values]
    assert prices.to_pandas()["amount"].tolist() == [Decimal(v) for v in values]


def test_a_constrained_decimal_exports_with_its_own_precision_and_scale(source):
    priced = source.topic("priced", Priced, dedup=("key",))
    priced.append({"key": "a", "amount": "12345678.1234"})
    assert str(priced.to_arrow().schema.field("amount").type) == "decimal128(12, 4)"

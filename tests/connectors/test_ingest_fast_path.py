"""``ingest`` validates with pydantic-core's JSON validator first only where that stores
exactly what the exact path stores (json.loads, then the topic's own validation)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.connectors.ingest import ingest_jsonl
from minikafka.util import dumpfiles


class Priced(BaseModel):
    sku: str
    price: Decimal


def _stored(src: Source, table: str, cols: str) -> list[tuple]:
    return src.ledger.conn.execute(f'SELECT {cols} FROM "{table}" ORDER BY _id').fetchall()


@pytest.mark.parametrize("fast", [True, False])
def test_a_decimal_is_stored_as_the_exact_path_reads_it_so_a_re_ingest_is_all_duplicates(tmp_path, monkeypatch, fast):
    monkeypatch.setattr(dumpfiles, "FAST_JSON", fast)
    dump = tmp_path / "prices.jsonl"
    dump.write_text('{"sku": "a", "price": 1.0}\n{"sku": "b", "price": 1e2}\n')
    assert not dumpfiles.fast_json_allowed(Priced)  # the JSON validator reads 1.0 as Decimal('1')
    with Source(str(tmp_path / "l.sqlite")) as src:
        topic = src.topic("prices", Priced, dedup=("price",))
        first = ingest_jsonl(topic, dump)
        again = ingest_jsonl(topic, dump)
        assert (first.appended, again.appended, again.duplicates) == (2, 0, 2)
        assert _stored(src, "prices", "price") == [(str(Decimal("1.0")),), (str(Decimal("100.0")),)]


@pytest.mark.parametrize("fast", [True, False])
def test_a_stream_keeps_the_whole_line_even_when_it_has_a_data_key(tmp_path, monkeypatch, fast):
    monkeypatch.setattr(dumpfiles, "FAST_JSON", fast)
    dump = tmp_path / "events.jsonl"
    dump.write_text(json.dumps({"data": {"x": 1}, "other": 2}) + "\n" + json.dumps({"y": 3}) + "\n")
    with Source(str(tmp_path / "l.sqlite")) as src:
        stream = src.stream("events")
        result = ingest_jsonl(stream, dump)
        assert result.appended == 2
        assert [json.loads(r[0]) for r in _stored(src, "events", "data")] == [
            {"data": {"x": 1}, "other": 2}, {"y": 3}]


def test_a_model_with_its_own_model_validate_takes_the_exact_path():
    class Own(BaseModel):
        x: int

        @classmethod
        def model_validate(cls, obj, **kwargs):
            return super().model_validate(obj, **kwargs)

    class Plain(BaseModel):
        x: int

    assert dumpfiles.fast_json_allowed(Plain) and not dumpfiles.fast_json_allowed(Own)

"""ingest streams the file: bounded batches inserted into one open transaction."""

from __future__ import annotations

import gzip
import json

import pytest
from pydantic import BaseModel

from minikafka.connectors.ingest import ingest_jsonl
from minikafka.errors import InputFileError


class Item(BaseModel):
    url: str
    n: int


def _lines(rows):
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def test_ingest_hands_rows_to_the_ledger_in_batches_no_larger_than_batch_rows(file_source, tmp_path, monkeypatch):
    topic = file_source.topic("items", Item, dedup=("url",))
    path = tmp_path / "feed.jsonl"
    path.write_text(_lines([{"url": f"u{i}", "n": i} for i in range(7)]))
    sizes, in_tx = [], []
    original = topic.rows.insert_encoded_in_current_transaction

    def spy(models, encoded, **kwargs):
        sizes.append(len(models))
        in_tx.append(file_source._conn.in_transaction)
        return original(models, encoded, **kwargs)

    monkeypatch.setattr(topic.rows, "insert_encoded_in_current_transaction", spy)
    result = ingest_jsonl(topic, path, batch_rows=3)
    assert sizes == [3, 3, 1] and all(in_tx)
    assert result.appended == 7 and topic.count() == 7


def test_ingest_skips_duplicates_that_fall_in_different_batches(file_source, tmp_path):
    topic = file_source.topic("items", Item, dedup=("url",))
    path = tmp_path / "feed.jsonl"
    path.write_text(_lines([{"url": "a", "n": 1}, {"url": "b", "n": 2}, "not json", {"url": "a", "n": 3},
                            "", {"url": "b", "n": 4}]))
    result = ingest_jsonl(topic, path, batch_rows=1)
    assert (result.lines, result.appended, result.duplicates, result.quarantined, result.blank) == (6, 2, 2, 1, 1)
    assert result.accounted == result.lines
    assert [m.n for m in topic.iter_new()] == [1, 2]


def test_ingest_of_a_truncated_gzip_stores_nothing_even_after_batches_were_inserted(file_source, tmp_path):
    topic = file_source.topic("items", Item, dedup=("url",))
    blob = gzip.compress(_lines([{"url": f"u{i}", "n": i} for i in range(2000)] + ["bad"]).encode())
    path = tmp_path / "feed.jsonl.gz"
    path.write_bytes(blob[: len(blob) - 20])
    with pytest.raises(InputFileError, match="truncated"):
        ingest_jsonl(topic, path, batch_rows=10)
    assert topic.count() == 0 and file_source.quarantined("items") == []


def test_ingest_refuses_a_batch_size_below_one(file_source, tmp_path):
    topic = file_source.topic("items", Item, dedup=None)
    path = tmp_path / "feed.jsonl"
    path.write_text(_lines([{"url": "a", "n": 1}]))
    with pytest.raises(ValueError, match="batch_rows"):
        ingest_jsonl(topic, path, batch_rows=0)
    assert topic.count() == 0


def test_an_int_beyond_64_bits_is_a_quarantined_row_not_a_failed_ingest(file_source, tmp_path):
    topic = file_source.topic("items", Item, dedup=("url",))
    path = tmp_path / "feed.jsonl"
    path.write_text(_lines([{"url": "a", "n": 1}, {"url": "b", "n": 2**70}, {"url": "c", "n": -(2**63)}]))
    result = ingest_jsonl(topic, path)
    assert (result.appended, result.quarantined) == (2, 1)
    (bad,) = file_source.quarantined("items")
    assert bad["origin"] == "feed.jsonl:2" and "outside the 64-bit integer range" in bad["reason"]

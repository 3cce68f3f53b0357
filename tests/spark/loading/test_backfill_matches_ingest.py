"""ingest and backfill read the same dump alike: same rows stored, same (origin, reason) quarantined."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.connectors.ingest import ingest_jsonl
from minikafka.spark.loading.backfill import backfill


class Reading(BaseModel):
    """Every field has a JVM rule: clean lines take backfill's fast path."""

    key: str
    value: float
    note: str | None = None


class Blob(BaseModel):
    """A dict field (stored as JSON): no JVM plan, every line goes through pydantic."""

    key: str
    value: float
    extra: dict | None = None


BAD_DUMP = b"\n".join([
    b'{"key": "a", "value": 1.5}',                            # 1 good
    b'{"key": "b", "value": 2}   trailing',                   # 2 an object, then junk
    b'{"key": "c", "value": NaN}',                            # 3 NaN in a float field
    b'{"key": "d"}',                                          # 4 a field missing
    b'{"key": "e", "value": "x"}',                            # 5 wrong type
    b'{"key": "f\xff\xfe", "value": 1}',                      # 6 not UTF-8
    b"",                                                      # 7 blank
    b'{"key": "a", "value": 9}',                              # 8 duplicate of line 1
    b'{"key": "g", "value": 3, "extra": {"x": NaN}}',         # 9 NaN inside a JSON field
    b'{"key": "h", "value": 4} {"key": "i", "value": 5}',     # 10 two objects
    b'{"key": "j", "value": 5}}',                             # 11 a stray brace
    b'{"key": "k", "value": 6, "note": "x"} "tail"',          # 12 a trailing string
    b"[1, 2]",                                                # 13 not an object
    b'{"key": "l", "value": 7, "note": "a \\"quoted\\" {b}"}',  # 14 good: escapes and braces in a string
]) + b"\n"


def stored_and_quarantined(src: Source, model) -> tuple[list, list]:
    rows = sorted(sorted(m.model_dump().items()) for m in src.topic("t", model, dedup=("key",)).iter_new())
    bad = sorted((q["origin"], q["reason"]) for q in src.quarantined("t"))
    return rows, bad


@pytest.mark.spark
def test_backfill_and_ingest_store_and_quarantine_the_same_bad_dump_alike(spark, tmp_path):
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(BAD_DUMP)
    for model in (Reading, Blob):
        with Source(str(tmp_path / f"ingest-{model.__name__}.sqlite")) as src:
            ingest_jsonl(src.topic("t", model, dedup=("key",)), dump)
            by_ingest = stored_and_quarantined(src, model)
        with Source(str(tmp_path / f"backfill-{model.__name__}.sqlite")) as src:
            src.topic("t", model, dedup=("key",))
            backfill(spark, src, "t", [str(dump)], model=model, progress=None)
            by_backfill = stored_and_quarantined(src, model)
        assert by_backfill == by_ingest, model.__name__
        rows, bad = by_ingest
        assert [dict(r)["key"] for r in rows] == ["a", "g", "l"] if model is Reading else ["a", "l"]
        reasons = dict(bad)
        for line in (2, 10, 11, 12):
            assert reasons[f"dump.jsonl:{line}"].startswith("malformed JSON: Extra data"), (model, line)
        assert reasons["dump.jsonl:3"].startswith("invalid row: ") and "NaN" in reasons["dump.jsonl:3"]
        if model is Blob:
            assert reasons["dump.jsonl:9"].startswith("invalid row: ")


@pytest.mark.spark
def test_a_dump_cut_into_many_chunks_loads_and_numbers_lines_as_ingest_does(spark, tmp_path, monkeypatch):
    import gzip

    from minikafka.spark.loading import dumpsplit

    monkeypatch.setattr(dumpsplit, "CHUNK_BYTES", 600)  # dozens of chunks; bad lines on their edges
    copies = []
    for k in range(30):
        block = BAD_DUMP.replace(b'"key": "', b'"key": "%d-' % k)
        if k % 3 == 1:
            block = block.replace(b"\n", b"\r\n")  # CRLF lines
        if k % 3 == 2:
            block += b'{"key": "cr\r%d", "value": 1}\n' % k  # a lone CR inside a line
        copies.append(block)
    dump = tmp_path / "big.jsonl.gz"
    dump.write_bytes(gzip.compress(b"".join(copies)))
    for model in (Reading, Blob):
        with Source(str(tmp_path / f"ingest-{model.__name__}.sqlite")) as src:
            ingest_jsonl(src.topic("t", model, dedup=("key",)), dump)
            by_ingest = stored_and_quarantined(src, model)
            bad_payloads = sorted(q["payload"] for q in src.quarantined("t"))
        with Source(str(tmp_path / f"backfill-{model.__name__}.sqlite")) as src:
            src.topic("t", model, dedup=("key",))
            result = backfill(spark, src, "t", [str(dump)], model=model, progress=None)
            assert len(result.files[0].chunks) >= 15
            by_backfill = stored_and_quarantined(src, model)
            assert sorted(q["payload"] for q in src.quarantined("t")) == bad_payloads
        assert by_backfill == by_ingest, model.__name__
        assert len(by_ingest[1]) >= 90

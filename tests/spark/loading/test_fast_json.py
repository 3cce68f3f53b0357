"""Backfill's fast JSON path (pydantic-core's JSON validator) accepts only rows the exact
path (json.loads, then the model) accepts, stored the same way.

Each tricky line is loaded with the fast path, without it, and by ``ingest``; the topic and
the quarantine (with reasons) must be identical.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, field_validator

from minikafka import Source
from minikafka.connectors.ingest import ingest_jsonl
from minikafka.spark.loading import backfill as bf
from minikafka.util import dumpfiles

pytestmark = pytest.mark.spark


class Post(BaseModel):
    url: str = Field(min_length=8, pattern=r"^https?://")
    title: str = Field(max_length=12)
    votes: int = Field(ge=0)
    ratio: float = Field(lt=1.5)
    kind: Literal["a", "b"]
    at: datetime
    draft: bool
    note: str | None = None


class Custom(BaseModel):
    url: str

    @field_validator("url")
    @classmethod
    def lower(cls, v: str) -> str:
        return v.lower()


GOOD = {"url": "https://x/1", "title": "hello", "votes": 3, "ratio": 0.5, "kind": "a",
        "at": "2024-05-01T10:00:00.123456+02:00", "draft": False}


def variants() -> list[str]:
    def v(**kw):
        return json.dumps({**GOOD, **kw})

    lines = [json.dumps(GOOD), v(url="https://x/2", note="n"), v(url="https://x/3", note=None),
             v(url="https://x/4", at="2024-05-01 10:00:00"), v(url="https://x/5", at="2024-05-01T10:00:00Z"),
             v(url="https://x/6", title=5), v(url="https://x/7", title="12345"), v(url="https://x/8", title="true"),
             v(url="https://x/9", title={"a": 1}), v(url="https://x/10", title="x" * 13),
             v(url="ftp://nope/11"), v(url="http://a"), v(url="https://x/12", votes=-1),
             v(url="https://x/13", votes="7"), v(url="https://x/14", votes=1.0), v(url="https://x/15", votes=2**70),
             v(url="https://x/16", ratio=1.5), v(url="https://x/17", ratio=1), v(url="https://x/18", kind="c"),
             v(url="https://x/19", at="yesterday"), v(url="https://x/20", at=1714557600),
             v(url="https://x/21", at="2024-02-30T00:00:00"), v(url="https://x/22", draft="true"),
             v(url="https://x/23", draft=1), v(url="https://x/24", note=7),
             '{"url": "https://x/25"}', "[1, 2]", "not json", "", "   ",
             v(url="https://x/26", extra="ignored"), v(url="https://x/27", title="ünïcode ok"),
             v(url="https://x/28", ratio="NaN"), '{"url": "https://x/29", ' + json.dumps(GOOD)[1:],
             v(url="https://x/30") + " junk", v(url="https://x/31") + "}", v(url="https://x/32") + ' {"a": 1}',
             v(url="https://x/33", title="a}b"), v(url="https://x/34", title="a{b"), v(url="https://x/35") + "\r",
             v(url="https://x/36") + " \t ", v(url="https://x/37", title="-5"), v(url="https://x/38", title=""),
             v(url="https://x/39", title="[x]"), v(url="https://x/40", title=[1]), v(url="https://x/41", title="t"),
             v(url="https://x/42", note='say "}" {'), " " + v(url="https://x/43"),
             v(url="https://x/44")[:-1] + ', "votes": 9}', v(url="https://x/45")[:-1] + ', "votes": -9}',  # a key twice
             v(url="https://x/46", ratio=0.1)[:-1].replace('"ratio": 0.1', '"ratio": 1e400') + "}",
             "\ufeff" + v(url="https://x/47"), v(url="https://x/48", title="tab\there"),
             json.dumps(GOOD)]  # a duplicate of the first
    return lines


def contents(path) -> tuple:
    conn = sqlite3.connect(path)
    try:
        cols = [r[1] for r in conn.execute('PRAGMA table_info("posts")') if not r[1].startswith("_")]
        topic = conn.execute(f'SELECT {", ".join(cols)} FROM "posts" ORDER BY "_id"').fetchall()
        quarantine = conn.execute("SELECT origin, reason, payload FROM _minikafka_quarantine ORDER BY id").fetchall()
        return topic, quarantine
    finally:
        conn.close()


class StrictPost(BaseModel):
    """Strict: the JSON validator would take an ISO string for ``at``; the exact path refuses it."""

    model_config = ConfigDict(strict=True)
    url: str
    at: datetime


def test_strict_models_take_the_exact_path_only():
    assert dumpfiles.fast_json_allowed(Post) and dumpfiles.fast_json_allowed(Custom)
    assert not dumpfiles.fast_json_allowed(StrictPost)


TRICKY = "\n".join(variants()).encode() + (
    b'\n\xff\xfe not utf-8\n{"url": "https://x/50", "title": "a\x01b"}\n'  # a raw control character
    b'{"url": "https://x/51", "title": "\\ud800", "votes": 1, "ratio": 0.1, "kind": "a", '
    b'"at": "2024-05-01T10:00:00", "draft": true}\n'  # a lone surrogate escape
    b'{"url": "https://x/52", "title": "ok", "votes": 1, "ratio": NaN, "kind": "a", "at": "2024-05-01", "draft": true}\n')


@pytest.mark.parametrize("model", [Post, Custom, StrictPost])
def test_the_fast_path_stores_and_quarantines_exactly_as_the_exact_path_and_ingest(spark, tmp_path, monkeypatch,
                                                                                 model):
    dump = tmp_path / "posts.jsonl"
    dump.write_bytes(TRICKY)
    results, ingested = [], []
    for fast in (True, False):  # the flag is read on the driver: the chunk tasks carry its verdict
        monkeypatch.setattr(dumpfiles, "FAST_JSON", fast)
        path = tmp_path / f"fast-{fast}.sqlite"
        with Source(str(path)) as src:
            src.topic("posts", model, dedup=("url",))
            bf.backfill(spark, src, "posts", [str(dump)], model=model, progress=None)
        results.append(contents(path))
        path = tmp_path / f"ingest-{fast}.sqlite"
        with Source(str(path)) as src:
            ingest_jsonl(src.topic("posts", model, dedup=("url",)), dump)
        ingested.append(contents(path))
    assert results[0] == results[1]
    assert ingested[0] == ingested[1]  # ingest's fast path too
    by_ingest = ingested[1]
    assert results[0][0] == by_ingest[0]
    assert [q[:2] for q in results[0][1]] == [q[:2] for q in by_ingest[1]]  # origin and reason
    topic, quarantine = results[0]
    if model is Post:
        assert len(topic) >= 10 and len(quarantine) >= 15

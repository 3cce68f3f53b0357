"""The JVM fast path of backfill accepts only rows pydantic accepts, stored the same way.

Each tricky line is loaded twice, once with the JVM checks and once with pydantic alone;
the topic and the quarantine (with reasons) must be identical.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Literal

import pytest
from pydantic import BaseModel, Field, field_validator

from minikafka import Source
from minikafka.spark import backfill as bf
from minikafka.spark import jvmcheck

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


def test_models_with_custom_validators_have_no_jvm_plan():
    with Source(":memory:") as src:
        assert jvmcheck.plan(Custom, src.topic("c", Custom, dedup=None).layout) is None
        assert jvmcheck.plan(Post, src.topic("p", Post, dedup=None).layout) is not None


def test_jvm_checks_accept_exactly_what_pydantic_accepts(spark, tmp_path, monkeypatch):
    dump = tmp_path / "posts.jsonl"
    dump.write_bytes("\n".join(variants()).encode() + b"\n\xff\xfe not utf-8\n")
    results = []
    for jvm in (True, False):
        monkeypatch.setattr(bf, "JVM_CHECKS", jvm)
        path = tmp_path / f"jvm-{jvm}.sqlite"
        with Source(str(path)) as src:
            src.topic("posts", Post, dedup=("url",))
            bf.backfill(spark, src, "posts", [str(dump)], model=Post, progress=None)
        results.append(contents(path))
    assert results[0] == results[1]
    topic, quarantine = results[0]
    assert len(topic) >= 10 and len(quarantine) >= 15

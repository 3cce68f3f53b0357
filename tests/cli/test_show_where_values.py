"""show --where: values converted to the column's stored form; bad values are usage errors."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from pydantic import BaseModel

from minikafka import Source
from tests.cli.helpers import invoke


class Post(BaseModel):
    url: str
    published: datetime


def _seed(path):
    with Source(path) as src:
        t = src.topic("posts", Post, dedup=("url",))
        t.extend([{"url": f"u{m}", "published": datetime(2025, 1, 1, 0, m, tzinfo=timezone.utc)} for m in (2, 3, 4)])
    return path


def _urls(db_path, *where):
    args = [a for w in where for a in ("--where", w)]
    out = invoke("show", "posts", *args, "--limit", "0", "--json", "--source", db_path)
    assert out.exit_code == 0, out.output
    return [r["url"] for r in json.loads(out.output)]


def test_show_where_on_a_datetime_compares_instants_not_text(db_path):
    _seed(db_path)
    assert _urls(db_path, "published<2025-01-01T00:03:00Z") == ["u2"]
    assert _urls(db_path, "published>=2025-01-01T00:03:00Z") == ["u3", "u4"]
    assert _urls(db_path, "published=2025-01-01T00:03:00Z") == ["u3"]
    assert _urls(db_path, "published=2025-01-01 00:03:00+00:00") == ["u3"]
    assert _urls(db_path, "published=2025-01-01T01:03:00+01:00") == ["u3"]
    assert _urls(db_path, "published=2025-01-01T00:03:00") == ["u3"]  # no offset: UTC


@pytest.mark.parametrize("where, value, accepted", [
    ("published>garbage", "garbage", "ISO 8601 date-time"),
    ("_status=done", "done", "new or handled"),
])
def test_show_where_with_a_value_the_column_cannot_hold_is_a_usage_error(db_path, where, value, accepted):
    _seed(db_path)
    out = invoke("show", "posts", "--where", where, "--source", db_path)
    assert out.exit_code == 2
    assert repr(value) in out.output and accepted in out.output and "Traceback" not in out.output


def test_show_where_status_matches_the_status_show_prints(db_path):
    _seed(db_path)
    with Source(db_path) as src:
        src.topic("posts", Post, dedup=("url",)).set_handled(1)
    assert _urls(db_path, "_status=handled") == ["u2"]
    assert _urls(db_path, "_status=new") == ["u3", "u4"]

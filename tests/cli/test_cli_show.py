"""show: --json, --consumer, --from-id, --where (safe filters), --follow."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from minikafka import Source
from tests.cli.helpers import Item, invoke, seed


def test_show_json_prints_one_array_with_metadata_first(db_path):
    seed(db_path)
    out = invoke("show", "items", "--json", "--limit", "2", "--source", db_path)
    assert out.exit_code == 0
    rows = json.loads(out.output)
    assert [r["url"] for r in rows] == ["u0", "u1"]
    assert list(rows[0])[:4] == ["_id", "_created_at", "_status", "_parent_id"]


def test_show_from_id_starts_at_that_id(db_path):
    seed(db_path)
    out = invoke("show", "items", "--from-id", "4", "--source", db_path)
    assert [json.loads(line)["_id"] for line in out.output.splitlines()] == [4, 5]


def test_show_consumer_sees_its_own_pending_rows(db_path):
    seed(db_path, consumers=("clean", "score"))
    with Source(db_path) as src:
        t = src.topic("items", Item, dedup=("url",))
        t.set_handled(1, consumer="clean")
        t.set_handled(2, consumer="clean")
    out = invoke("show", "items", "--consumer", "clean", "--status", "new", "--json", "--source", db_path)
    rows = json.loads(out.output)
    assert [r["_id"] for r in rows] == [3, 4, 5]
    assert {r["_consumer_status"] for r in rows} == {"new"}
    done = json.loads(invoke("show", "items", "--consumer", "clean", "--status", "handled", "--json",
                             "--source", db_path).output)
    assert [r["_id"] for r in done] == [1, 2] and {r["_status"] for r in done} == {"new"}


def test_show_unknown_consumer_exits_1_naming_it(db_path):
    seed(db_path)
    out = invoke("show", "items", "--consumer", "ghost", "--source", db_path)
    assert out.exit_code == 1 and "ghost" in out.output


def test_show_where_filters_on_typed_columns(db_path):
    seed(db_path)
    out = invoke("show", "items", "--where", "score>=0.3", "--where", "lang = en", "--json", "--source", db_path)
    assert [r["url"] for r in json.loads(out.output)] == ["u3"]
    out = invoke("show", "items", "--where", "lang=null", "--json", "--source", db_path)
    assert [r["url"] for r in json.loads(out.output)] == ["u0", "u2", "u4"]
    out = invoke("show", "items", "--where", "title~1", "--json", "--source", db_path)
    assert [r["url"] for r in json.loads(out.output)] == ["u1"]


def test_show_where_never_runs_user_text_as_sql(db_path):
    seed(db_path)
    out = invoke("show", "items", "--where", "title = x' OR '1'='1", "--json", "--source", db_path)
    assert out.exit_code == 0 and json.loads(out.output) == []
    bad = invoke("show", "items", "--where", "1=1; DROP TABLE items", "--source", db_path)
    assert bad.exit_code == 2 and "FIELD OP VALUE" in bad.output
    with Source(db_path) as src:
        assert src.topic("items", Item, dedup=("url",)).count() == 5


def test_show_where_rejects_unknown_columns_and_bad_values_as_usage_errors(db_path):
    seed(db_path)
    out = invoke("show", "items", "--where", "nope=1", "--source", db_path)
    assert out.exit_code == 2 and "no column 'nope'" in out.output and "title" in out.output
    out = invoke("show", "items", "--where", "score>abc", "--source", db_path)
    assert out.exit_code == 2 and "not a valid float" in out.output


def test_show_follow_prints_rows_as_they_commit(db_path):
    seed(db_path, n=3)
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "show", "items", "--follow", "--limit", "1",
                             "--interval", "0.05", "--source", db_path], stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["url"] == "u2"  # the last --limit rows first
        with Source(db_path) as src:
            src.topic("items", Item, dedup=("url",)).append({"title": "late", "url": "u9", "score": 1.0})
        t0 = time.monotonic()
        line = proc.stdout.readline()
        assert json.loads(line)["url"] == "u9" and time.monotonic() - t0 < 20
    finally:
        proc.terminate()
        proc.wait(timeout=10)

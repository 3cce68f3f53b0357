"""`minikafka backfill --remote`: a load on the warm engine (Spark Connect) instead of a JVM of
its own, giving the ledger a classic Spark application gives; bad --remote use is one line."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from minikafka import Source
from minikafka.spark.loading.backfill import backfill
from schemas.homelab import RssItem
from tests.pipelines.helpers import ROOT, generate
from tests.util.ports import unused_port

pytestmark = pytest.mark.spark


def mk(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def dumps(tmp_path):
    """Two dumps of the example's items: plain JSONL with a bad line and a repeat, and gzip."""
    first = generate(tmp_path, 300)
    lines = first.read_text().splitlines()
    plain = tmp_path / "part-1.jsonl"
    plain.write_text("\n".join(lines[:200] + ['{"url": "not a row"', lines[0]]) + "\n")
    packed = tmp_path / "part-2.jsonl.gz"
    with gzip.open(packed, "wt") as fh:
        fh.write("\n".join(lines[150:]) + "\n")
    return [plain, packed]


def content(path) -> dict:
    with Source(str(path)) as source:
        items = source.topic("rss.items", RssItem, dedup=("url",))
        rows = sorted(r.data.model_dump_json() for r in items.iter_new(records=True))
        quarantined = sorted((q["reason"], q["payload"]) for q in source.quarantined("rss.items", limit=1000))
    return {"rows": rows, "quarantined": quarantined}


def test_a_backfill_on_the_engine_loads_what_a_classic_application_loads(tmp_path, engine_url, spark):
    files = dumps(tmp_path)
    for name in ("engine", "classic"):
        with Source(str(tmp_path / f"{name}.sqlite")) as source:
            source.topic("rss.items", RssItem, dedup=("url",))
    out = mk("backfill", "--remote", engine_url, "--source", tmp_path / "engine.sqlite", "--json", "rss.items", *files)
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads(out.stdout)
    assert summary["status"] == "succeeded" and summary["rows_quarantined"] >= 1  # the bad line, and the demo's own
    assert "starting Spark" not in out.stderr and "loading on the engine" in out.stderr
    with Source(str(tmp_path / "classic.sqlite")) as source:
        backfill(spark, source, "rss.items", [str(f) for f in files], model=RssItem, progress=None)
    assert content(tmp_path / "engine.sqlite") == content(tmp_path / "classic.sqlite")
    assert len(content(tmp_path / "engine.sqlite")["rows"]) == summary["rows_loaded"] > 0
    again = mk("backfill", "--remote", engine_url, "--source", tmp_path / "engine.sqlite", "--json", "rss.items", *files)
    assert again.returncode == 0 and json.loads(again.stdout)["rows_loaded"] == 0  # nothing twice


@pytest.mark.parametrize("args, message", [
    (["--remote", "http://127.0.0.1:1"], "expected sc://HOST:PORT"),
    (["--remote", "sc://127.0.0.1:15002", "--master", "local[1]"], "has its own master"),
])
def test_bad_remote_use_is_one_line_before_anything_starts(tmp_path, args, message):
    dump = generate(tmp_path, 5)
    out = mk("backfill", *args, "--source", tmp_path / "l.sqlite", "--create", "rss.items", dump)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "l.sqlite").exists() or content(tmp_path / "l.sqlite")["rows"] == []


def test_an_engine_that_does_not_answer_is_one_line_and_nothing_is_loaded(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as source:
        source.topic("rss.items", RssItem, dedup=("url",))
    out = mk("backfill", "--remote", f"sc://127.0.0.1:{unused_port()}", "--source", tmp_path / "l.sqlite",
             "rss.items", generate(tmp_path, 5))
    assert out.returncode == 1 and "no engine answers" in out.stderr and "Traceback" not in out.stderr
    assert content(tmp_path / "l.sqlite")["rows"] == []

"""Backfill: every format, bad input, re-runs, and kill -9 then re-run."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.spark.loading.backfill import BackfillError, backfill
from minikafka.util.faults import ENV

pytestmark = pytest.mark.spark

ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]


class Event(BaseModel):
    key: str
    n: int
    note: str | None = None


def rows(start: int, count: int) -> list[dict]:
    return [{"key": f"k{i}", "n": i, "note": None if i % 3 else f"note {i}"} for i in range(start, start + count)]


def write_jsonl(path, items, *, gz=False, extra_lines=()):
    text = "\n".join([json.dumps(r) for r in items] + list(extra_lines)) + "\n"
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def ledger(tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        src.topic("events", Event, dedup=("key",))
        src.topic("plain", Event, dedup=None)  # no dedup keys
        yield src


def load(spark, ledger, paths, topic="events", **kw):
    return backfill(spark, ledger, topic, [str(p) for p in paths], model=Event, progress=None, **kw)


def test_jsonl_gzip_csv_parquet_directory_and_glob(spark, ledger, tmp_path):
    d = tmp_path / "dumps"
    d.mkdir()
    write_jsonl(d / "a.jsonl", rows(0, 10))
    write_jsonl(d / "b.jsonl.gz", rows(10, 10), gz=True)
    (d / "c.csv").write_text("key;n;note\n" + "".join(f"k{i};{i};'semi;colon {i}'\n" for i in range(20, 30)))
    with gzip.open(d / "d.csv.gz", "wt") as fh:
        fh.write("key,n,note\n" + "".join(f"k{i},{i},\n" for i in range(30, 40)))
    pq.write_table(pa.Table.from_pylist(rows(40, 10)), d / "e.parquet")
    load(spark, ledger, [d / "a.jsonl", d / "b.jsonl.gz", d / "e.parquet", d / "d.csv.gz"])
    result = load(spark, ledger, [d / "c.csv"], delimiter=";", quote="'")
    assert result.run.rows_out == 10
    events = ledger.topic("events", Event, dedup=("key",))
    got = {e.key: e for e in events.iter_new()}
    assert len(got) == 50 and got["k25"].note == "semi;colon 25" and got["k33"].note is None
    assert got["k3"].note == "note 3" and got["k41"].n == 41
    again = load(spark, ledger, [d])  # the directory: everything already loaded
    assert again.run.rows_out == 0 and len(again.skipped_files) == 5
    glob_result = load(spark, ledger, [str(d / "*.jsonl*")], topic="plain")
    assert glob_result.run.rows_out == 20


def test_bad_rows_are_quarantined_with_file_line_and_reason(spark, ledger, tmp_path):
    path = tmp_path / "mixed.jsonl"
    lines = [json.dumps(r) for r in rows(0, 3)]
    lines += ['{"key": "broken", "n": ', json.dumps({"key": "typed", "n": "many"}), json.dumps({"n": 5}), "[1, 2]"]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"key": "bytes\xff\xfe", "n": 1}\n')
    result = load(spark, ledger, [path])
    assert (result.run.rows_out, result.run.rows_quarantined) == (3, 5)
    reasons = {q["origin"]: q["reason"] for q in ledger.quarantined("events")}
    assert reasons["mixed.jsonl:4"].startswith("malformed JSON")
    assert "n: Input should be a valid integer" in reasons["mixed.jsonl:5"]
    assert "key: Field required" in reasons["mixed.jsonl:6"]
    assert "expected a JSON object" in reasons["mixed.jsonl:7"]
    assert "not UTF-8" in reasons["mixed.jsonl:8"]


def test_file_level_problems_name_the_file_and_write_nothing(spark, ledger, tmp_path):
    with pytest.raises(BackfillError, match="missing.jsonl: file not found"):
        load(spark, ledger, [tmp_path / "missing.jsonl"])
    good = write_jsonl(tmp_path / "good.jsonl.gz", rows(0, 2000), gz=True)
    truncated = tmp_path / "truncated.jsonl.gz"
    truncated.write_bytes(good.read_bytes()[:-200])
    with pytest.raises(BackfillError, match="truncated.jsonl.gz: truncated gzip file"):
        load(spark, ledger, [good, truncated])
    csv = tmp_path / "nokey.csv"
    csv.write_text("n,note\n1,x\n")
    with pytest.raises(BackfillError, match=r"nokey.csv: CSV header lacks required column\(s\) \['key'\]"):
        load(spark, ledger, [csv])
    assert ledger.topic("events", Event, dedup=("key",)).count() == 0
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert load(spark, ledger, [empty]).run.rows_out == 0


def test_rerun_of_a_topic_without_dedup_keys_loads_nothing_twice(spark, ledger, tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", rows(0, 100))
    load(spark, ledger, [path], topic="plain")
    load(spark, ledger, [path], topic="plain")
    assert ledger.topic("plain", Event, dedup=None).count() == 100


def test_load_as_handled(spark, ledger, tmp_path):
    load(spark, ledger, [write_jsonl(tmp_path / "h.jsonl", rows(0, 5))], as_handled=True)
    events = ledger.topic("events", Event, dedup=("key",))
    assert events.count("handled") == 5 and events.count("new") == 0


def kill_9_at(point: str, child: str, *args: str) -> None:
    """Run ``child`` in a new interpreter until it freezes at fault point ``point``, then SIGKILL it."""
    env = {**os.environ, ENV: point, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", child, *args], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.time() + 240
    for line in proc.stderr:
        if line.startswith("FROZEN") or time.time() > deadline:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


CHILD = """
import sys
from minikafka import Source
from minikafka.spark import build_session
from minikafka.spark.loading.backfill import backfill
from tests.spark.loading.test_backfill import Event
spark = build_session(master="local[1]", testing=True)
with Source(sys.argv[1]) as src:
    src.topic("plain", Event, dedup=None)
    backfill(spark, src, "plain", [sys.argv[2]], model=Event, batch_rows=1000, progress=None)
"""


@pytest.mark.slow
def test_kill_9_between_batches_then_rerun_loads_exactly_once(spark, ledger, tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "big.jsonl.gz", rows(0, 5000), gz=True, extra_lines=["not json"])
    kill_9_at("backfill:batch-committed", CHILD, ledger.path, str(path))
    plain = ledger.topic("plain", Event, dedup=None)
    assert plain.count() == 1000  # the first batch was committed, then the process died
    from minikafka.spark.loading import dumpsplit

    monkeypatch.setattr(dumpsplit, "CHUNK_BYTES", 8192)  # chunks the first run committed whole are not read
    again = load(spark, ledger, [path], topic="plain", batch_rows=1000)
    assert 4000 < again.rows_read < 4800 and again.run.rows_out == 4000
    assert plain.count() == 5000
    assert sorted(e.n for e in plain.iter_new()) == list(range(5000))
    assert len(ledger.quarantined("plain")) == 1


SPANNING_CHILD = """
import sys
from minikafka import Source
from minikafka.spark import build_session
from minikafka.spark.loading import dumpsplit
from minikafka.spark.loading.backfill import backfill
from tests.spark.loading.test_backfill import Event
dumpsplit.CHUNK_BYTES = 8192  # chunks of ~200 lines: a transaction of 1,000 rows spans several chunk files
spark = build_session(master="local[1]", testing=True)
with Source(sys.argv[1]) as src:
    src.topic("plain", Event, dedup=None)
    backfill(spark, src, "plain", [sys.argv[2]], model=Event, batch_rows=1000, progress=None)
"""


@pytest.mark.slow
@pytest.mark.parametrize("point, kept", [("backfill:batch-inserted", 0), ("backfill:batch-committed", 1000)])
def test_a_transaction_spanning_several_chunk_files_killed_before_or_after_its_commit_then_rerun_loads_once(
        spark, ledger, tmp_path, monkeypatch, point, kept):
    from minikafka.spark.loading import dumpsplit

    path = write_jsonl(tmp_path / "big.jsonl.gz", rows(0, 5000), gz=True, extra_lines=["not json"])
    writer = dumpsplit.ChunkWriter(f"file://{tmp_path}/cut", 8192)
    writer.feed(gzip.decompress(path.read_bytes()))
    assert len([c for c in writer.close() if c.first_line <= 1000]) >= 4  # the first transaction spans 4+ files
    kill_9_at(point, SPANNING_CHILD, ledger.path, str(path))
    plain = ledger.topic("plain", Event, dedup=None)
    assert plain.count() == kept  # the transaction is whole or absent
    monkeypatch.setattr(dumpsplit, "CHUNK_BYTES", 8192)
    again = load(spark, ledger, [path], topic="plain", batch_rows=1000)
    assert again.run.rows_out == 5000 - kept and again.run.status == "succeeded"
    assert [e.n for e in plain.iter_new()] == list(range(5000))  # every line once, ids in line order
    assert len(ledger.quarantined("plain")) == 1


def test_a_recompressed_copy_of_a_loaded_dump_is_skipped_although_spark_began_validating_it(spark, ledger, tmp_path,
                                                                                          monkeypatch):
    from minikafka.spark.loading import dumpsplit

    monkeypatch.setattr(dumpsplit, "CHUNK_BYTES", 4096)  # many chunks: validation starts before the hash is known
    first = write_jsonl(tmp_path / "a.jsonl.gz", rows(0, 3000), gz=True)
    copy = tmp_path / "b.jsonl.gz"
    copy.write_bytes(gzip.compress(gzip.decompress(first.read_bytes()), compresslevel=1))
    plain = ledger.topic("plain", Event, dedup=None)  # no dedup key: a second load would double every row
    assert load(spark, ledger, [first], topic="plain").run.rows_out == 3000
    again = load(spark, ledger, [copy], topic="plain")
    assert again.skipped_files == [str(copy)] and again.run.rows_out == 0 and again.run.status == "succeeded"
    assert plain.count() == 3000
    assert not list((tmp_path / ".minikafka-staging").rglob("*.arrow"))  # nothing of it left behind

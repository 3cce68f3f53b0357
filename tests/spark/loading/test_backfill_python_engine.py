"""backfill's Python engine (no JVM, for a small dump or one with nothing new): the same dumps
through both engines leave identical ledgers, quarantines and counts; a backfill with nothing
new starts no JVM; ``--engine auto`` picks Spark above the row threshold.

Before: 16 rows took 13-21 s and a backfill that loaded nothing 7 s (the JVM's start)."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.spark.loading.backfill import backfill
from minikafka.util import dumpsize
from minikafka.util.faults import ENV
from tests.cli.helpers import invoke

ROOT = Path(__file__).resolve().parents[3]


class Row(BaseModel):
    key: str
    n: int
    score: float | None = None
    note: str | None = None
    at: dt.datetime | None = None
    price: Decimal | None = None
    tags: list[str] | None = None


JSONL = b"\n".join([
    b'{"key": "a", "n": 1, "tags": ["x"]}',
    b'{"key": "b", "n": "2", "score": 1.5}',
    b'{"key": "c", "n": 2.5}',
    b'not json',
    b'',
    b'   ',
    b'{"key": "a", "n": 9}',
    b'{"key": "d\xff", "n": 4}',
    b'{"key": "e", "n": 99999999999999999999}',
    b'{"key": "f", "n": 6, "score": NaN}',
    b'{"key": "g", "n": 7, "at": "2024-01-02T03:04:05.123456+02:00", "price": "1.10"}',
    b'[1, 2]',
    b'{"key": "h", "n": 8}\r',
    b'{"key": "i", "n": 9, "tags": "nope"}',
]) + b"\n"

CSV = (
    'key,n,score,note\n'
    'c1,1,0.5,plain\n'
    'c2,x,,bad int\n'
    '\n'
    'c3,3,,""\n'
    'c4,4,,\n'
    '"c5\nsecond line",5,,"multi\nline"\n'
    'c6,6\n'
    'c7,7,1,2,3\n'
    'c1,1,,duplicate\n'
    '"c8",8,,"he said ""hi"""\n'
    'c9,9,,5" screen\n'
    'c10,10,,crlf\r\n'
    ',11,,empty key\n'
    '"",12,,quoted empty key\n'
    'c13,13,nan,\n'
)

SEMI = ("k1;1;0.5;'a;b';;;\nk2;2;;'';;;\nk3;x;;;;;\n'k4';4;;'it''s';2024-01-01T00:00:00Z;1.50;'[\"t\"]'\n"
        "k5;5;;six fields;;\n'k6\nnext';6;;;;;\n")


def _parquet(path: Path) -> Path:
    table = pa.table({
        "key": ["p1", "p2", "p3", "p1", None, "p5"],
        "n": pa.array([1, None, 3, 1, 5, 6], pa.int64()),
        "score": [0.5, 1.0, float("nan"), None, 2.0, 3.0],
        "at": pa.array([dt.datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=dt.timezone.utc)] * 6,
                       pa.timestamp("us", "UTC")),
        "extra": ["x"] * 6,
    })
    pq.write_table(table, path, row_group_size=2)
    return path


def dumps(tmp: Path) -> dict[str, tuple[list[Path], dict]]:
    """name -> (files, backfill options)."""
    d = tmp / "dumps"
    d.mkdir()
    (d / "rows.jsonl").write_bytes(JSONL)
    with gzip.open(d / "rows.jsonl.gz", "wb") as fh:
        fh.write(JSONL.replace(b'"a"', b'"za"'))
    (d / "rows.csv").write_text(CSV, encoding="utf-8", newline="")
    with gzip.open(d / "rows.csv.gz", "wt", encoding="utf-8", newline="") as fh:
        fh.write(CSV.replace("c", "z"))
    (d / "semi.csv").write_text(SEMI, encoding="utf-8", newline="")
    return {
        "jsonl": ([d / "rows.jsonl", d / "rows.jsonl.gz"], {}),
        "csv": ([d / "rows.csv", d / "rows.csv.gz"], {}),
        "csv-options": ([d / "semi.csv"], {"delimiter": ";", "quote": "'", "header": False}),
        "parquet": ([_parquet(d / "rows.parquet")], {}),
        "as-handled": ([d / "rows.jsonl"], {"as_handled": True}),
    }


def snapshot(path: str) -> dict:
    """The topic's rows (fields, status, lineage run-free), the quarantine, the file loads, the run's counts."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        cols = [r[1] for r in conn.execute('PRAGMA table_info("t")') if not r[1].startswith("_") or r[1] == "_id"]
        rows = conn.execute(f'SELECT {", ".join(repr(c) for c in cols)} FROM "t" ORDER BY _id').fetchall()
        status = conn.execute('SELECT _id, _status FROM "t:status" ORDER BY _id').fetchall()
        quarantine = conn.execute("SELECT topic, origin, reason, payload FROM _minikafka_quarantine "
                                  "ORDER BY origin").fetchall()
        runs = conn.execute("SELECT kind, stage, status, rows_in, rows_out, rows_duplicate, rows_quarantined "
                            "FROM _minikafka_runs ORDER BY started_at").fetchall()
        return {"rows": rows, "status": status, "quarantine": quarantine, "runs": runs}
    finally:
        conn.close()


def run_both(spark, tmp_path, name, files, opts):
    out = {}
    for engine in ("python", "spark"):
        path = str(tmp_path / f"{name}-{engine}.sqlite")
        with Source(path) as src:
            src.topic("t", Row, dedup=("key",))
            results = [backfill(spark if engine == "spark" else None, src, "t", [str(f) for f in files], model=Row,
                                progress=None, batch_rows=3, **opts) for _ in range(2)]  # the second: nothing new
        out[engine] = (snapshot(path), [(r.rows_read, r.skipped_files, [str(f.path) for f in r.files])
                                        for r in results])
        assert results[0].run.details["engine"] == engine
    return out


@pytest.mark.spark
@pytest.mark.parametrize("name", ["jsonl", "csv", "csv-options", "parquet", "as-handled"])
def test_the_same_dump_through_python_and_spark_leaves_identical_ledgers(spark, tmp_path, name):
    files, opts = dumps(tmp_path)[name]
    out = run_both(spark, tmp_path, name, files, opts)
    python, spark_ = out["python"], out["spark"]
    assert python[0]["quarantine"] == spark_[0]["quarantine"]
    assert python[0]["rows"] == spark_[0]["rows"]
    assert python[0] == spark_[0]
    assert python[1] == spark_[1]
    assert python[0]["rows"] and python[0]["runs"][0][2] == "succeeded"


def test_python_engine_keeps_quarantine_lines_and_reasons(tmp_path):
    files, _ = dumps(tmp_path)["csv"]
    with Source(str(tmp_path / "l.sqlite")) as src:
        src.topic("t", Row, dedup=("key",))
        result = backfill(None, src, "t", [str(files[0])], model=Row, progress=None)
        reasons = {q["origin"]: q["reason"] for q in src.quarantined("t")}
        keys = [r.key for r in src.topic("t", Row, dedup=("key",)).iter_new()]
    assert result.run.details["engine"] == "python" and result.run.status == "succeeded"
    assert reasons["rows.csv:3"].startswith("invalid row: n:")
    assert reasons["rows.csv:10"] == "malformed CSV row: 2 columns where 4 are expected"  # c5 spans 7-9
    assert reasons["rows.csv:11"] == "malformed CSV row: 5 columns where 4 are expected"
    assert keys[:4] == ["c1", "c3", "c4", "c5\nsecond line"] and "c9" in keys and "c10" in keys


def test_a_backfill_with_nothing_new_starts_no_jvm(tmp_path, monkeypatch):
    from minikafka.spark import session

    def no_jvm(*args, **kwargs):
        raise AssertionError("a JVM was started")

    monkeypatch.setattr(session, "build_session", no_jvm)
    ledger = tmp_path / "l.sqlite"
    with Source(str(ledger)) as src:
        src.topic("t", Row, dedup=("key",))
    big = tmp_path / "big.jsonl.gz"
    with gzip.open(big, "wt") as fh:  # above the threshold: auto would pick Spark were anything new
        fh.writelines(json.dumps({"key": f"k{i}", "n": i}) + "\n" for i in range(dumpsize.SMALL_DUMP_ROWS + 1))
    first = invoke("backfill", "--source", ledger, "t", big, "--engine", "python", "--json", "-q")
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["rows_loaded"] == dumpsize.SMALL_DUMP_ROWS + 1
    t0 = time.perf_counter()
    again = invoke("backfill", "--source", ledger, "t", big, "--json", "-q")
    assert again.exit_code == 0, again.output
    out = json.loads(again.output)
    assert out["skipped_files"] == [str(big)] and out["rows_loaded"] == 0 and out["status"] == "succeeded"
    assert time.perf_counter() - t0 < 5
    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps({"key": f"s{i}", "n": i}) + "\n" for i in range(16)))
    for _ in range(2):  # a small dump, then the same with nothing new: no JVM either
        result = invoke("backfill", "--source", ledger, "t", small, "--json", "-q")
        assert result.exit_code == 0, result.output
    with Source(str(ledger), read_only=True) as src:
        assert src.topic("t", Row, dedup=("key",)).count() == dumpsize.SMALL_DUMP_ROWS + 17


def test_engine_python_refuses_spark_options(tmp_path):
    ledger = tmp_path / "l.sqlite"
    with Source(str(ledger)) as src:
        src.topic("t", Row, dedup=("key",))
    dump = tmp_path / "d.jsonl"
    dump.write_text('{"key": "a", "n": 1}\n')
    result = invoke("backfill", "--source", ledger, "t", dump, "--engine", "python", "--master", "local[2]")
    assert result.exit_code == 2 and "--master is for Spark" in result.output


def test_auto_picks_spark_above_the_threshold_and_python_at_or_below_it():
    limit = dumpsize.SMALL_DUMP_ROWS
    assert limit == 50_000
    assert dumpsize.choose_engine("auto", limit) == "python"
    assert dumpsize.choose_engine("auto", limit + 1) == "spark"
    assert dumpsize.choose_engine("auto", limit + 1, nothing_new=True) == "python"
    assert dumpsize.choose_engine("auto", 16, spark_options=True) == "spark"
    assert dumpsize.choose_engine("python", 10**9) == "python"
    assert dumpsize.choose_engine("spark", 1) == "spark"
    with pytest.raises(ValueError, match="engine must be one of"):
        dumpsize.choose_engine("jvm", 1)


def test_rows_are_counted_per_format_and_the_count_stops_past_the_limit(tmp_path):
    plain = tmp_path / "a.jsonl"
    plain.write_text("{}\n" * 10 + "{}")  # a last line without its line break counts
    assert dumpsize.count_rows(plain, "jsonl") == 11
    packed = tmp_path / "b.jsonl.gz"
    with gzip.open(packed, "wb") as fh:
        fh.write(b"{}\n" * 1_000_000)
    assert dumpsize.count_rows(packed, "jsonl") == 1_000_000
    assert 10 < dumpsize.count_rows(packed, "jsonl", stop_after=10) < 1_000_000  # read no further than needed
    pq.write_table(pa.table({"a": list(range(70_000))}), tmp_path / "c.parquet")
    assert dumpsize.count_rows(tmp_path / "c.parquet", "parquet") == 70_000
    assert dumpsize.dump_rows([(plain, "jsonl"), (tmp_path / "c.parquet", "parquet")]) == 70_011
    assert dumpsize.dump_rows([(packed, "jsonl"), (plain, "jsonl")], stop_after=50_000) > 50_000
    broken = tmp_path / "d.jsonl.gz"
    broken.write_bytes(b"\x1f\x8b\x08junk")
    assert dumpsize.count_rows(broken, "jsonl") == 0  # the load itself names the problem


CHILD = """
import sys
from minikafka import Source
from minikafka.spark.loading.backfill import backfill
from tests.spark.loading.test_backfill_python_engine import Row
with Source(sys.argv[1]) as src:
    src.topic("t", Row, dedup=None)
    backfill(None, src, "t", [sys.argv[2]], model=Row, batch_rows=1000, progress=None)
"""


def test_python_engine_killed_9_between_batches_then_rerun_loads_exactly_once(tmp_path):
    dump = tmp_path / "d.jsonl.gz"
    with gzip.open(dump, "wt") as fh:
        fh.writelines(json.dumps({"key": f"k{i}", "n": i}) + "\n" for i in range(5000))
        fh.write("not json\n")
    ledger = str(tmp_path / "l.sqlite")
    with Source(ledger) as src:
        src.topic("t", Row, dedup=None)
    env = {**os.environ, ENV: "backfill:batch-committed", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, ledger, str(dump)], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in proc.stderr:
        if line.startswith("FROZEN"):
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with Source(ledger) as src:
        topic = src.topic("t", Row, dedup=None)
        assert topic.count() == 1000  # the first transaction committed, then the process died
        again = backfill(None, src, "t", [str(dump)], model=Row, batch_rows=1000, progress=None)
        assert again.run.rows_out == 4000 and again.run.details["engine"] == "python"
        assert sorted(r.n for r in topic.iter_new()) == list(range(5000))
        assert len(src.quarantined("t")) == 1
        assert backfill(None, src, "t", [str(dump)], model=Row, progress=None).skipped_files == [str(dump)]


def test_ctrl_c_during_a_python_engine_backfill_exits_130_records_it_and_a_rerun_loads_the_rest(tmp_path):
    from tests.cli.test_interrupts import mk, wait_for_line

    ledger = str(tmp_path / "l.sqlite")
    with Source(ledger) as src:
        src.topic("t", Row, dedup=("key",))
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps({"key": f"k{i}", "n": i}) + "\n" for i in range(30)))
    proc = mk("backfill", "--source", ledger, "t", dump, "--batch-rows", "10",
              env={"MINIKAFKA_FREEZE_AT": "backfill:batch-committed"})
    wait_for_line(proc.stderr, "FROZEN backfill:batch-committed", timeout=120)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    with Source(ledger) as src:
        (run,) = src.runs(limit=1)
        assert (run["kind"], run["status"], run["details"]["engine"]) == ("backfill", "interrupted", "python")
        assert 0 < src.topic("t", Row, dedup=("key",)).count() < 30
    again = mk("backfill", "--source", ledger, "t", dump, "--json")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert json.loads(out)["status"] == "succeeded"
    with Source(ledger) as src:
        assert sorted(r.n for r in src.topic("t", Row, dedup=("key",)).iter_new()) == list(range(30))

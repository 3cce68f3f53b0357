"""backfill on headerless CSV, misnamed gzip, and nonsense options (refused before the JVM starts)."""

from __future__ import annotations

import gzip
import json

import pytest

import minikafka.spark.session
from minikafka import Source
from minikafka.spark.backfill import BackfillOptionError, backfill
from tests.backfill.test_backfill import Event, ledger, load, rows, write_jsonl  # noqa: F401 (ledger: a fixture)
from tests.cli.helpers import invoke


@pytest.fixture
def no_jvm(monkeypatch):
    """Starting Spark fails the test: these checks must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(minikafka.spark.session, "build_session", refuse)


def seeded(tmp_path) -> str:
    db = str(tmp_path / "ledger.sqlite")
    with Source(db) as src:
        src.topic("events", Event, dedup=("key",))
    return db


def events_in(db) -> int:
    with Source(db) as src:
        return src.topic("events", Event, dedup=("key",)).count()


@pytest.mark.spark
def test_backfill_no_header_csv_loads_rows(spark, ledger, tmp_path):  # noqa: F811
    path = tmp_path / "noheader.csv"
    path.write_text("k1,1,first\nk2,2,\nk3,three,x\nk4,4,\"with, comma\"\n")
    result = load(spark, ledger, [path], header=False)
    assert (result.run.rows_out, result.run.rows_quarantined) == (3, 1)
    got = {e.key: e for e in ledger.topic("events", Event, dedup=("key",)).iter_new()}
    assert sorted(got) == ["k1", "k2", "k4"]
    assert got["k1"].note == "first" and got["k2"].note is None and got["k4"].note == "with, comma"
    (q,) = ledger.quarantined("events")
    assert q["origin"] == "noheader.csv:3" and "n: Input should be a valid integer" in q["reason"]


@pytest.mark.spark
def test_backfill_reads_gzip_named_plain_and_unnamed_gzip_by_content(spark, ledger, tmp_path):  # noqa: F811
    plain = write_jsonl(tmp_path / "plain.jsonl.gz", rows(0, 5))  # a .gz name, plain content
    packed = tmp_path / "packed.jsonl"  # gzip content, no .gz
    packed.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows(5, 5)).encode()))
    result = load(spark, ledger, [plain, packed])
    assert (result.run.rows_out, result.run.rows_quarantined) == (10, 0)
    assert ledger.topic("events", Event, dedup=("key",)).count() == 10
    assert load(spark, ledger, [plain, packed]).skipped_files == [str(plain), str(packed)]


@pytest.mark.parametrize("rows_opt", ["0", "-3", "many"])
def test_backfill_rejects_batch_rows_zero_before_starting_spark(tmp_path, no_jvm, rows_opt):
    db = seeded(tmp_path)
    dump = write_jsonl(tmp_path / "a.jsonl", rows(0, 3))
    out = invoke("backfill", "--source", db, "--batch-rows", rows_opt, "events", dump, "--model",
                 "tests.backfill.test_backfill:Event")
    assert out.exit_code == 2 and "--batch-rows" in out.output, out.output
    assert events_in(db) == 0


@pytest.mark.parametrize(("extra", "option"), [
    (["--delimiter", ";;"], "--delimiter"),
    (["--quote", ""], "--quote"),
    (["--delimiter", "'", "--quote", "'"], "--quote"),
    (["--no-header"], "--no-header"),  # the file is JSONL
    (["--master", "spark://nowhere:7077"], "--staging"),
])
def test_backfill_rejects_nonsense_options_before_starting_spark(tmp_path, no_jvm, extra, option):
    db = seeded(tmp_path)
    dump = write_jsonl(tmp_path / "a.jsonl", rows(0, 3))
    out = invoke("backfill", "--source", db, *extra, "events", dump, "--model", "tests.backfill.test_backfill:Event")
    assert out.exit_code == 2 and option in out.output, out.output
    assert events_in(db) == 0


def test_backfill_names_a_missing_file_before_starting_spark(tmp_path, no_jvm):
    db = seeded(tmp_path)
    out = invoke("backfill", "--source", db, "events", tmp_path / "nope.jsonl")
    assert out.exit_code == 1 and "nope.jsonl: file not found" in out.output, out.output


def test_backfill_names_an_unknown_topic_before_starting_spark(tmp_path, no_jvm):
    db = seeded(tmp_path)
    out = invoke("backfill", "--source", db, "nosuch", write_jsonl(tmp_path / "a.jsonl", rows(0, 1)))
    assert out.exit_code == 1 and "nosuch" in out.output, out.output


def test_backfill_library_refuses_batch_rows_zero_before_reading_anything(tmp_path):
    with Source(seeded(tmp_path)) as src, pytest.raises(BackfillOptionError, match="batch_rows"):
        backfill(None, src, "events", [str(tmp_path / "missing.jsonl")], batch_rows=0, progress=None)

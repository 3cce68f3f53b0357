"""backfill on headerless CSV, misnamed gzip, and nonsense options (refused before the JVM starts)."""

from __future__ import annotations

import gzip
import json
from datetime import datetime

import pytest
from pydantic import BaseModel, Field

import minikafka.spark.session
from minikafka import Source
from minikafka.spark.loading.backfill import BackfillError, BackfillOptionError, backfill
from tests.cli.helpers import invoke
from tests.spark.loading.test_backfill import Event, ledger, load, rows, write_jsonl  # noqa: F401 (ledger: a fixture)


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
                 "tests.spark.loading.test_backfill:Event")
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
    out = invoke("backfill", "--source", db, *extra, "events", dump, "--model", "tests.spark.loading.test_backfill:Event")
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


@pytest.mark.parametrize("form", ["plain", "uri"])
def test_backfill_names_a_missing_local_staging_directory_before_starting_spark(tmp_path, no_jvm, form):
    db = seeded(tmp_path)
    dump = write_jsonl(tmp_path / "a.jsonl", rows(0, 3))
    missing = tmp_path / "no" / "such"
    staging = str(missing) if form == "plain" else f"file://{missing}"
    out = invoke("backfill", "--source", db, "--staging", staging, "events", dump, "--model",
                 "tests.spark.loading.test_backfill:Event")
    assert out.exit_code == 1 and f"staging location file://{missing} does not exist" in out.output, out.output
    assert "starting Spark" not in out.output and "Traceback" not in out.output
    assert events_in(db) == 0


def test_backfill_library_names_a_missing_local_staging_directory_before_reading_anything(tmp_path):
    from minikafka.errors import StagingError

    with Source(seeded(tmp_path)) as src, pytest.raises(StagingError, match="does not exist"):
        backfill(None, src, "events", [str(tmp_path / "missing.jsonl")], staging=str(tmp_path / "nope"), progress=None)


@pytest.mark.parametrize(("content", "says"), [
    (b"\x1f\x8bgarbage", "corrupt gzip file (unknown compression method"),
    (b"\x1f\x8b" + bytes(range(200)), "corrupt gzip file (unknown compression method"),
    (b"\x1f\x8b\x08\xe0garbage garbage", "corrupt gzip file (reserved flag bits"),
    (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"garbage garbage", "corrupt gzip file"),
    (gzip.compress(b'{"key": "k", "n": 1}\n' * 500, mtime=0)[:-30], "truncated gzip file"),
])
def test_backfill_calls_a_damaged_gzip_corrupt_and_only_one_cut_short_truncated(tmp_path, content, says):
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(content)
    with Source(seeded(tmp_path)) as src, pytest.raises(BackfillError) as caught:
        backfill(None, src, "events", [str(bad)], progress=None)
    assert f"bad.jsonl.gz: {says}" in str(caught.value)
    if "corrupt" in says:
        assert "truncated" not in str(caught.value)


class Row5(BaseModel):
    """The five columns of the CSV test (RssItem's shape, without its URL pattern)."""

    url: str
    feed: str
    title: str = Field(min_length=1)
    body: str
    published: datetime


@pytest.mark.spark
def test_backfill_csv_keeps_empty_and_multiline_fields_and_tells_why_a_row_is_malformed(spark, tmp_path):
    t = "2025-01-01T00:00:00Z"
    main = tmp_path / "t.csv"
    main.write_text(
        f"url,feed,title,body,published\n"                 # 1
        f"https://e.org/1,f,t1,,{t}\n"                      # 2 empty body
        f'https://e.org/2,f,t2,"",{t}\n'                    # 3 quoted empty body
        f'https://e.org/3,f,t3,"multi\nline body",{t}\n'    # 4-5 one record on two lines
        f"\n"                                               # 6 blank: skipped
        f"https://e.org/4,f,t4,b,{t},x,y\n"                 # 7 seven columns
        f'https://e.org/5,f,t5,"say ""hi""\n\nbye",{t}\n'   # 8-10 a quoted blank line inside
        f"https://e.org/6,f,,b,{t}\n"                       # 11 empty title: too short
        f"https://e.org/7,f,t7\n"                           # 12 three columns
        f'https://e.org/8,f,t8,"never closed,{t}\n'         # 13 runs to the end of the file
        f"https://e.org/9,f,t9,b,{t}\n", encoding="utf-8")  # 14 swallowed by line 13
    crlf = tmp_path / "crlf.csv"
    crlf.write_bytes(f'url,feed,title,body,published\r\nhttps://e.org/10,f,t10,"a\r\nb",{t}\r\n'
                     f"https://e.org/11,f,t11,c,{t}\r\nhttps://e.org/12,f,t12\r\n".encode())
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        src.topic("rss", Row5, dedup=("url",))
        src.topic("events", Event, dedup=("key",))
        result = backfill(spark, src, "rss", [str(main), str(crlf)], model=Row5, progress=None)
        assert (result.run.rows_out, result.run.rows_quarantined) == (6, 5)
        bodies = {m.url[-2:].lstrip("/"): m.body for m in src.topic("rss", Row5, dedup=("url",)).iter_new()}
        assert bodies == {"1": "", "2": "", "3": "multi\nline body", "5": 'say "hi"\n\nbye', "10": "a\nb", "11": "c"}
        reasons = {q["origin"]: q["reason"] for q in src.quarantined("rss")}
        assert reasons == {
            "t.csv:7": "malformed CSV row: 7 columns where 5 are expected",
            "t.csv:11": "invalid row: title: String should have at least 1 character",
            "t.csv:12": "malformed CSV row: 3 columns where 5 are expected",
            "t.csv:13": "malformed CSV row: a quoted field is never closed (the record runs on to the end of "
                        "the file or to the next quote character)",
            "crlf.csv:5": "malformed CSV row: 3 columns where 5 are expected",
        }
        # an optional field: empty unquoted is None, empty quoted is ""
        opt = tmp_path / "opt.csv"
        opt.write_text('key,n,note\nk1,1,\nk2,2,""\nk3,3,x\n')
        backfill(spark, src, "events", [str(opt)], model=Event, progress=None)
        notes = {e.key: e.note for e in src.topic("events", Event, dedup=("key",)).iter_new()}
        assert notes == {"k1": None, "k2": "", "k3": "x"}

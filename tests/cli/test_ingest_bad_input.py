"""ingest on bad input: every line accounted for, bad lines quarantined, bad files named, no traceback."""

from __future__ import annotations

import gzip
import json
import re

from minikafka import Source
from tests.cli.helpers import Item, invoke

MODEL = "tests.cli.helpers:Item"


def good(i: int) -> str:
    return json.dumps({"title": f"t{i}", "url": f"u{i}", "score": i / 10})


def ingest(db_path, path, *extra):
    return invoke("ingest", "--create", "--source", db_path, "--model", MODEL, "--dedup", "url", "items", path, *extra)


def counts(output: str) -> dict[str, int]:
    line = next(x for x in output.splitlines() if " lines, " in x)
    found = dict((k, int(v)) for v, k in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", line.split(": ", 1)[1]))
    return found


def quarantine(db_path) -> list[tuple[str, str]]:
    with Source(db_path) as src:
        return sorted((q["origin"], q["payload"]) for q in src.quarantined("items"))


def stored(db_path) -> list[str]:
    with Source(db_path) as src:
        return sorted(m.url for m in src.topic("items", Item, dedup=("url",)).iter_new())


def test_ingest_requarantines_a_line_that_failed_before(db_path, tmp_path):
    feed = tmp_path / "feed.jsonl"
    feed.write_text(good(1) + "\n" + "not json monday\n")
    assert ingest(db_path, feed).exit_code == 0
    feed.write_text(good(2) + "\n" + '{"title": "x", "url": "tue", "score": "high"}\n')  # the nightly rewrite
    out = ingest(db_path, feed)
    assert out.exit_code == 0, out.output
    assert counts(out.output)["quarantined"] == 1
    assert quarantine(db_path) == [("feed.jsonl:2", "not json monday"),
                                   ("feed.jsonl:2", '{"title": "x", "url": "tue", "score": "high"}')]
    assert stored(db_path) == ["u1", "u2"]


def test_ingest_counts_an_identical_bad_line_as_already_quarantined(db_path, tmp_path):
    feed = tmp_path / "feed.jsonl"
    feed.write_text(good(1) + "\nnot json\n")
    ingest(db_path, feed)
    out = ingest(db_path, feed)
    assert out.exit_code == 0, out.output
    assert "0 quarantined, 1 already quarantined" in out.output
    assert quarantine(db_path) == [("feed.jsonl:2", "not json")]


def test_ingest_accounts_for_every_line_on_rerun(db_path, tmp_path):
    feed = tmp_path / "feed.jsonl"
    lines = [good(1), good(2), good(1), "", "   ", "{broken", '{"title": "x", "url": "ux"}', "[1, 2]"]
    feed.write_text("\n".join(lines) + "\n")
    first = counts(ingest(db_path, feed).output)
    assert first == {"lines": 8, "appended": 2, "duplicates": 1, "quarantined": 3, "already quarantined": 0,
                     "blank": 2}
    feed.write_text("\n".join(lines + [good(3), "{other broken"]) + "\n")
    out = ingest(db_path, feed)
    assert out.exit_code == 0, out.output
    again = counts(out.output)
    assert again == {"lines": 10, "appended": 1, "duplicates": 3, "quarantined": 1, "already quarantined": 3,
                     "blank": 2}
    for result in (first, again):
        assert result["lines"] == sum(v for k, v in result.items() if k != "lines")
    assert stored(db_path) == ["u1", "u2", "u3"]
    assert [o for o, _p in quarantine(db_path)] == ["feed.jsonl:10", "feed.jsonl:6", "feed.jsonl:7", "feed.jsonl:8"]


def test_ingest_quarantines_a_non_utf8_line_and_keeps_the_others(db_path, tmp_path):
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(good(1).encode() + b'\n{"title": "caf\xe9", "url": "x", "score": 1}\n' + good(2).encode() + b"\n")
    out = ingest(db_path, feed)
    assert out.exit_code == 0, out.output
    assert "2 appended" in out.output and "1 quarantined" in out.output
    with Source(db_path) as src:
        (q,) = src.quarantined("items")
    assert q["origin"] == "feed.jsonl:2" and "not UTF-8" in q["reason"]
    assert stored(db_path) == ["u1", "u2"]


def test_ingest_of_a_binary_file_quarantines_its_lines_and_exits_1(db_path, tmp_path):
    blob = tmp_path / "photo.jsonl"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00")
    out = ingest(db_path, blob)
    assert out.exit_code == 1, out.output
    assert "Traceback" not in out.output and "no line of" in out.output
    with Source(db_path) as src:
        reasons = [q["reason"] for q in src.quarantined("items")]
    assert reasons and all("not UTF-8" in r or "malformed JSON" in r for r in reasons)


def test_ingest_reads_gzip_named_plain_file_by_content(db_path, tmp_path):
    plain = tmp_path / "feed.jsonl.gz"
    plain.write_text(good(1) + "\n")
    out = ingest(db_path, plain)
    assert out.exit_code == 0, out.output
    assert stored(db_path) == ["u1"]


def test_ingest_reads_gzip_content_whatever_its_name(db_path, tmp_path):
    packed = tmp_path / "feed.jsonl"
    packed.write_bytes(gzip.compress((good(1) + "\n" + good(2) + "\n").encode()))
    out = ingest(db_path, packed)
    assert out.exit_code == 0, out.output
    assert stored(db_path) == ["u1", "u2"]


def test_ingest_names_a_truncated_gzip_and_stops_cleanly(db_path, tmp_path):
    whole = gzip.compress("".join(good(i) + "\n" for i in range(2000)).encode())
    cut = tmp_path / "feed.jsonl.gz"
    cut.write_bytes(whole[:-100])
    out = ingest(db_path, cut)
    assert out.exit_code == 1
    assert "feed.jsonl.gz: truncated gzip file" in out.output and "nothing was stored" in out.output
    assert "Traceback" not in out.output and "Aborted" not in out.output
    assert stored(db_path) == [] and quarantine(db_path) == []


def test_ingest_names_a_corrupt_gzip_and_stops_cleanly(db_path, tmp_path):
    whole = bytearray(gzip.compress("".join(good(i) + "\n" for i in range(50)).encode()))
    whole[20:40] = b"\x00" * 20
    bad = tmp_path / "feed.gz"
    bad.write_bytes(bytes(whole))
    out = ingest(db_path, bad)
    assert out.exit_code == 1
    assert "feed.gz: corrupt gzip file" in out.output and "nothing was stored" in out.output
    assert stored(db_path) == [] and quarantine(db_path) == []


def test_ingest_names_a_truncated_gzip_on_standard_input(db_path):
    whole = gzip.compress((good(1) + "\n").encode())
    out = invoke("ingest", "--create", "--source", db_path, "--model", MODEL, "items", "-", input=whole[:-5])
    assert out.exit_code == 1 and "<stdin>: truncated gzip file" in out.output


def test_ingest_exits_1_and_says_so_when_every_line_was_quarantined_again(db_path, tmp_path):
    feed = tmp_path / "feed.jsonl"
    feed.write_text("nope\n{}\n")
    first = ingest(db_path, feed)
    assert first.exit_code == 1 and "every one of its 2 line(s) is in the quarantine (2 new" in first.output
    again = ingest(db_path, feed)
    assert again.exit_code == 1 and "(0 new, 2 already there)" in again.output
    assert len(quarantine(db_path)) == 2


def test_ingest_calls_gzip_magic_followed_by_garbage_corrupt_not_truncated(db_path, tmp_path):
    bad = tmp_path / "feed.jsonl.gz"
    bad.write_bytes(b"\x1f\x8bgarbage")
    out = ingest(db_path, bad)
    assert out.exit_code == 1 and "feed.jsonl.gz: corrupt gzip file (unknown compression method" in out.output
    assert "truncated" not in out.output and "Traceback" not in out.output
    assert stored(db_path) == [] and quarantine(db_path) == []

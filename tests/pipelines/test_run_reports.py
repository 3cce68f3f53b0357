"""`run` and `check` tell the truth: a dry run is labelled and counts what the real run does
(duplicates included), expectations failing under policy warn are printed with their rows,
`check` prints every result and the report's path. One Spark application (the shared session)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from minikafka import Source
from schemas.homelab import RssItem
from tests.cli.helpers import invoke
from tests.pipelines.helpers import generate, homelab_copy

pytestmark = pytest.mark.spark

WARN_SUITE = """
topic = "rss.youtube"
policy = "warn"

[[expect]]
type = "expect_column_values_to_not_be_null"
column = "url"

[[expect]]
type = "expect_column_values_to_match_regex"
column = "title"
regex = "^zzz"

[[expect]]
type = "expect_column_values_to_be_in_set"
column = "feed"
value_set = ["nowhere"]

[row_count]
min_ratio = 0.0
"""


def _json(out) -> dict:
    return json.loads(out.stdout)


def _runs(db: Path) -> int:
    with Source(str(db)) as src:
        return len(src.runs(limit=1000))


def test_a_dry_run_is_labelled_and_counts_the_duplicates_the_real_run_finds(spark, tmp_path):
    pipeline = homelab_copy(tmp_path)
    db = tmp_path / "homelab.sqlite"
    assert invoke("ingest", pipeline, "rss.items", generate(tmp_path, 60)).exit_code == 0
    first = invoke("run", pipeline, "--stage", "split_youtube", "--in-process", "--json")
    assert first.exit_code == 0, first.output
    made = _json(first)["stages"][0]["rows_out"]
    assert made > 0
    # the inputs are pending again, their outputs are stored: a run finds only duplicates
    assert invoke("replay", "rss.items", "--consumer", "split_youtube", "--pipeline", pipeline).exit_code == 0
    runs_before = _runs(db)

    dry = invoke("run", pipeline, "--stage", "split_youtube", "--in-process", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.splitlines()[0] == "dry run: nothing was written (the counts are what 'run' would do now)"
    assert "(dry run: nothing was written)" in dry.stdout.splitlines()[-1]
    row = re.search(r"^split_youtube\s+succeeded\s+(\d+)\s+(\d+)\s+(\d+)", dry.stdout, re.M)
    assert row and (int(row[2]), int(row[3])) == (0, made), dry.stdout
    dry_json = _json(invoke("run", pipeline, "--stage", "split_youtube", "--in-process", "--dry-run", "--json"))
    assert dry_json["dry_run"] is True and dry_json["stages"][0]["rows_duplicate"] == made
    assert _runs(db) == runs_before  # nothing was written, not even a run row
    with Source(str(db)) as src:
        assert src.topic("rss.youtube", RssItem, dedup=("url",)).count() == made
        assert src.topic("rss.items", RssItem, dedup=("url",)).count("new", consumer="split_youtube") > 0

    real = _json(invoke("run", pipeline, "--stage", "split_youtube", "--in-process", "--json"))
    counts = {k: real["stages"][0][k] for k in ("rows_in", "rows_out", "rows_duplicate", "rows_quarantined")}
    assert counts == {k: dry_json["stages"][0][k] for k in counts}
    assert real["dry_run"] is False and _runs(db) == runs_before + 1


def test_failed_expectations_under_warn_are_printed_by_check_and_run_with_rows_and_report(spark, tmp_path):
    suite = tmp_path / "warn.toml"
    suite.write_text(WARN_SUITE)
    pipeline = homelab_copy(tmp_path, replace={'expectations = ["quality/youtube.toml"]': f'expectations = ["{suite}"]'})
    assert invoke("ingest", pipeline, "rss.items", generate(tmp_path, 60)).exit_code == 0

    check = invoke("check", pipeline, "--stage", "split_youtube")
    assert check.exit_code == 1, check.output
    assert "split_youtube: suite warn (warn): FAILED on " in check.stdout
    assert re.search(r"ok   expect_column_values_to_not_be_null\(url\) unexpected=0 of \d+ \(0\.0%\)", check.stdout)
    failed = re.search(r"FAIL expect_column_values_to_match_regex\(title\) unexpected=(\d+) of (\d+) \(100\.0%\), "
                       r"e\.g\. '", check.stdout)
    assert failed and failed[1] == failed[2], check.stdout
    report = Path(re.search(r"report: (\S+\.html)", check.stdout)[1])
    assert report.is_file()
    checked = _json(invoke("check", pipeline, "--stage", "split_youtube", "--json"))
    assert checked["ok"] is False and checked["nothing_pending"] is False
    results = {r["expectation"]: r for r in checked["stages"][0]["suites"][0]["results"]}
    assert results["expect_column_values_to_be_in_set"]["arguments"] == {"column": "feed", "value_set": ["nowhere"]}
    assert results["expect_column_values_to_be_in_set"]["unexpected_sample"]
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        assert src.topic("rss.youtube", RssItem, dedup=("url",)).count() == 0  # check committed nothing

    run = invoke("run", pipeline, "--stage", "split_youtube", "--in-process")
    assert run.exit_code == 0, run.output
    assert re.search(r"WARNING split_youtube: suite warn \(warn\): 2 of 4 expectation\(s\) failed; "
                     r"the rows were committed anyway", run.stdout), run.stdout
    assert re.search(r"expect_column_values_to_be_in_set\(feed\) unexpected=\d+ of \d+ \(100\.0%\)", run.stdout)
    html = Path(re.search(r"report: (\S+\.html)", run.stdout)[1]).read_text()
    for text in ("expect_column_values_to_match_regex", "<code>regex</code> = ^zzz", "value_set", "100.00%",
                 "sample failing values", "unexpected of", "observed"):
        assert text in html, text
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        (last,) = src.runs(stage="split_youtube", limit=1)
        assert last["quality"]["report"] == str(Path(re.search(r"report: (\S+\.html)", run.stdout)[1]))
        assert src.topic("rss.youtube", RssItem, dedup=("url",)).count() == last["rows_out"] > 0

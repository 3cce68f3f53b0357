"""``minikafka nightly PIPELINE``: the night's files per declared topic, once each; run, health, logs.

Before, the nightly entry was scripts/nightly.sh: only inside this checkout, only into rss.items,
not in the wheel; and ``ingest`` read JSONL alone. These run the command on a project of its own
in a temp directory (no JVM: its DAG has nothing pending), the Spark test runs its stages.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import sys
from datetime import date, datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.pipelines.nightly import rotate_logs, run_night
from tests.cli.helpers import invoke
from tests.pipelines.helpers import ROOT, homelab_copy


class Ref(BaseModel):
    code: str
    price: float
    day: date
    note: str | None = None


class Daily(BaseModel):
    day: date
    events: int


PIPELINE = """
[pipeline]
name = "night"
source = "data/night.sqlite"

[topics."events"]
model = "tests.cli.helpers:Item"
dedup = ["url"]
ingest = "incoming/events/*.jsonl"

[topics."refs"]
model = "tests.pipelines.test_nightly_command:Ref"
dedup = ["code"]
ingest = ["incoming/refs/*.csv", "incoming/refs/*.parquet"]

[topics."rss.items"]
model = "schemas.homelab:RssItem"
dedup = ["url"]
{limits}
[topics."rss.articles"]
model = "schemas.homelab:RssItem"
dedup = ["url"]

[tables."daily"]
model = "tests.pipelines.test_nightly_command:Daily"
key = ["day"]

[[stages]]
name = "keep_articles"
job = "jobs.keep_articles"
inputs = ["rss.items"]
outputs = ["rss.articles"]
"""


def project(tmp_path: Path, *, limits: str = "") -> Path:
    """A project of its own: a pipeline file, a night's JSONL, CSV (one bad row) and Parquet files."""
    root = tmp_path / "proj"
    (root / "incoming" / "events").mkdir(parents=True)
    (root / "incoming" / "refs").mkdir(parents=True)
    (root / "pipeline.toml").write_text(PIPELINE.format(limits=limits))
    (root / "incoming" / "events" / "2026-01-01.jsonl").write_text(
        '{"title": "a", "url": "ua", "score": 0.5}\n{"title": "b", "url": "ub", "score": 1}\n')
    (root / "incoming" / "refs" / "refs.csv").write_text(
        "code,price,day,note\nA,1.5,2026-01-01,first\nB,abc,2026-01-02,\nC,3,2026-01-03,\n")
    pq.write_table(pa.table({"code": ["D", "E"], "price": [4.0, 5.5], "day": [date(2026, 1, 4), date(2026, 1, 5)],
                             "note": [None, "fifth"]}), root / "incoming" / "refs" / "refs.parquet")
    return root


def nightly(root: Path, *args):
    return invoke("nightly", root / "pipeline.toml", "--log-dir", root / "logs", *args)


def ledger_of(root: Path) -> str:
    return str(root / "data" / "night.sqlite")


def test_nightly_ingests_the_nights_jsonl_csv_and_parquet_files_once_then_nothing_new(tmp_path):
    root = project(tmp_path)
    first = nightly(root)
    assert first.exit_code == 0, first.output
    assert "ingest events incoming/events/2026-01-01.jsonl: 2 lines, 2 appended" in first.output
    assert "ingest refs incoming/refs/refs.csv: 3 lines, 2 appended, 0 duplicates, 1 quarantined" in first.output
    assert "ingest refs incoming/refs/refs.parquet: 2 lines, 2 appended" in first.output
    assert "nightly night: 3 file(s) ingested (6 row(s) appended, 1 quarantined), 0 already ingested" in first.output
    second = nightly(root)
    assert second.exit_code == 0, second.output
    assert second.output.count("ingested before, skipped") == 3
    assert "nightly night: 0 file(s) ingested (0 row(s) appended, 0 quarantined), 3 already ingested" in second.output
    with Source(ledger_of(root), read_only=True) as src:
        refs = {r.code: r for r in src.topic("refs", Ref, dedup=("code",)).iter_new()}
        assert sorted(refs) == ["A", "C", "D", "E"]
        assert refs["A"].price == 1.5 and refs["A"].day == date(2026, 1, 1) and refs["C"].note is None
        assert refs["E"].note == "fifth"
        (bad,) = src.quarantined("refs")
        assert bad["origin"] == "refs.csv:3" and "price" in bad["reason"]
        assert src.topic("events", src.model_of("events"), dedup=("url",)).count() == 2
        runs = src.runs(limit=50)
    kinds = sorted(r["kind"] for r in runs)
    assert kinds.count("ingest") == 3 and kinds.count("nightly") == 2
    night = next(r for r in runs if r["kind"] == "nightly" and r["rows_out"])
    assert night["status"] == "succeeded" and night["rows_quarantined"] == 1
    (log,) = (root / "logs").glob("nightly-*.log")
    text = log.read_text()
    assert text.count("minikafka nightly") == 2 and "minikafka health --pipeline" in text and "exit 0" in text


def test_a_file_whose_content_changed_is_ingested_again_and_a_copy_is_not(tmp_path):
    root = project(tmp_path)
    assert nightly(root).exit_code == 0
    events = root / "incoming" / "events"
    shutil.copy(events / "2026-01-01.jsonl", events / "copy.jsonl")
    (events / "2026-01-02.jsonl").write_text('{"title": "c", "url": "uc", "score": 2}\n')
    out = nightly(root)
    assert out.exit_code == 0, out.output
    assert "ingest events incoming/events/copy.jsonl: ingested before, skipped" in out.output
    assert "ingest events incoming/events/2026-01-02.jsonl: 1 lines, 1 appended" in out.output


def test_nightly_exits_1_when_a_file_cannot_be_ingested_and_still_runs_the_rest(tmp_path):
    root = project(tmp_path)
    (root / "incoming" / "refs" / "broken.parquet").write_bytes(b"not parquet at all")
    out = nightly(root)
    assert out.exit_code == 1, out.output
    assert "ingest refs incoming/refs/broken.parquet: FAILED" in out.output and "cannot read as Parquet" in out.output
    assert "ingest refs incoming/refs/refs.csv: 3 lines, 2 appended" in out.output
    assert "minikafka run" in out.output and "Traceback" not in out.output
    with Source(ledger_of(root), read_only=True) as src:
        failed = [r for r in src.runs(limit=50) if r["status"] == "failed"]
    assert {r["kind"] for r in failed} == {"ingest", "nightly"}


def test_nightly_exits_3_when_the_run_succeeds_but_a_health_check_fails(tmp_path):
    root = project(tmp_path, limits='freshness = "26h"\n')
    out = nightly(root)
    assert out.exit_code == 3, out.output
    assert "fail  topic rss.items freshness: no rows yet (limit 26h)" in out.output


def test_nightly_exits_2_on_a_bad_pipeline_file_and_logs_why(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[pipeline]\n")
    out = invoke("nightly", bad, "--log-dir", tmp_path / "logs")
    assert out.exit_code == 2, out.output
    assert "missing key 'source'" in next((tmp_path / "logs").glob("nightly-*.log")).read_text()


def test_a_second_nightly_while_one_holds_the_lock_exits_75_and_does_nothing(tmp_path):
    root = project(tmp_path)
    (root / "logs").mkdir()
    with open(root / "logs" / ".nightly.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        out = nightly(root)
    assert out.exit_code == 75 and "another nightly run holds" in out.output
    assert not Path(ledger_of(root)).exists()


def test_nightly_keeps_the_newest_logs_only(tmp_path):
    root = project(tmp_path)
    logs = root / "logs"
    logs.mkdir()
    for day in ("2025-12-29", "2025-12-30", "2025-12-31"):
        (logs / f"nightly-{day}.log").write_text("old\n")
    night = run_night(root / "pipeline.toml", command=[sys.executable, "-m", "minikafka.cli"], log_dir=logs, keep_logs=2, echo=lambda line: None,
                      today=lambda: datetime(2026, 1, 1, 2, 15, tzinfo=timezone.utc))
    assert night.exit_code == 0
    assert sorted(p.name for p in logs.glob("nightly-*.log")) == ["nightly-2025-12-31.log", "nightly-2026-01-01.log"]
    assert rotate_logs(logs, 2) == []


def test_ingest_reads_csv_and_parquet_typed_by_the_model_without_a_jvm(tmp_path):
    root = project(tmp_path)
    db = tmp_path / "refs.sqlite"
    args = ("--source", db, "--model", "tests.pipelines.test_nightly_command:Ref", "--dedup", "code", "--create")
    csv_out = invoke("ingest", *args, "refs", root / "incoming" / "refs" / "refs.csv", "--json")
    assert csv_out.exit_code == 0, csv_out.output
    assert json.loads(csv_out.output) | {"file": None} == {
        "topic": "refs", "file": None, "lines": 3, "appended": 2, "duplicates": 0, "quarantined": 1,
        "already_quarantined": 0, "blank": 0}
    pq_out = invoke("ingest", *args, "refs", root / "incoming" / "refs" / "refs.parquet")
    assert pq_out.exit_code == 0 and "2 appended" in pq_out.output, pq_out.output
    again = invoke("ingest", *args, "refs", root / "incoming" / "refs" / "refs.csv")
    assert "2 duplicates, 0 quarantined, 1 already quarantined" in again.output
    with Source(str(db), read_only=True) as src:
        assert src.topic("refs", Ref, dedup=("code",)).count() == 4


@pytest.mark.spark
def test_nightly_on_the_example_pipeline_ingests_runs_its_stages_and_passes_health(tmp_path):
    pipeline = homelab_copy(tmp_path, replace={'[topics."rss.items"]\n': '[topics."rss.items"]\ningest = "incoming/*.jsonl"\n'})
    (tmp_path / "incoming").mkdir()
    shutil.copy(ROOT / "examples" / "feed.jsonl", tmp_path / "incoming" / "feed.jsonl")
    out = invoke("nightly", pipeline, "--log-dir", tmp_path / "logs", "--in-process", "--master", "local[1]")
    assert out.exit_code == 0, out.output
    assert "ingest rss.items incoming/feed.jsonl:" in out.output and "total" in out.output
    with Source(str(tmp_path / "homelab.sqlite"), read_only=True) as src:
        assert src.topic("rss.scored", src.model_of("rss.scored"), dedup=("url",)).count() > 0
        assert any(r["kind"] == "nightly" and r["status"] == "succeeded" for r in src.runs(limit=50))


def test_nightly_compacts_the_pipelines_keyed_tables_after_the_run_and_records_it(tmp_path):
    root = project(tmp_path)
    assert nightly(root).exit_code == 0
    with Source(ledger_of(root)) as src:  # a day counted, then corrected twice: two superseded versions
        daily = src.table("daily", Daily, key=("day",))
        for events in (3, 4, 5):
            daily.upsert({"day": date(2026, 1, 1), "events": events})
        assert daily.count() == 3
    out = nightly(root)
    assert out.exit_code == 0, out.output
    assert "minikafka compact --pipeline" in out.output and "daily: 2 superseded version(s) deleted" in out.output
    with Source(ledger_of(root), read_only=True) as src:
        daily = src.table("daily", Daily, key=("day",))
        assert daily.count() == 1 and daily.get(date(2026, 1, 1)).events == 5
        compactions = src.runs(stage="compact")
    assert [(r["kind"], r["status"], r["rows_out"], r["outputs"]) for r in compactions][0] == (
        "compact", "succeeded", 2, ["daily"])

"""[lake.NAME] tables in a pipeline file, and the ``minikafka lake`` commands."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")

from minikafka import PipelineDefinitionError, Source  # noqa: E402
from minikafka.pipelines.definition import load_pipeline  # noqa: E402
from tests.cli.helpers import invoke  # noqa: E402
from tests.pipelines.helpers import ROOT, homelab_copy  # noqa: E402

from .readers import read_three_ways  # noqa: E402

LAKE = '\n[lake.scored]\nformat = "iceberg"\ntopic = "rss.scored"\nlocation = "lake/scored"\npartition_by = ["day(published)"]\n'


def test_the_shipped_lake_pipeline_declares_rss_scored_as_an_iceberg_table_partitioned_by_day():
    defn = load_pipeline(ROOT / "conf" / "homelab-lake.toml", check_jobs=False, suites=False)
    target = defn.lake["scored"]
    assert (target.topic, target.partition_by) == ("rss.scored", ("day(published)",))
    assert target.location == str((ROOT / "lake" / "scored").resolve())
    assert [s.name for s in defn.stages] == [s.name for s in load_pipeline(ROOT / "conf" / "homelab.toml",
                                                                           check_jobs=False, suites=False).stages]


@pytest.mark.parametrize("lake, message", [
    ('[lake.scored]\nformat = "iceberg"\ntopic = "rss.nope"\nlocation = "x"\n', "lake.scored.topic: unknown topic 'rss.nope'"),
    ('[lake.scored]\nformat = "iceberg"\ntopic = "rss.scored"\nlocation = "x"\npartition_by = ["day(nope)"]\n',
     "lake.scored.partition_by: 'nope' is not a field"),
    ('[lake.scored]\nformat = "orc"\ntopic = "rss.scored"\nlocation = "x"\n', "lake.scored.format"),
    ('[lake.scored]\nformat = "iceberg"\ntopic = "rss.scored"\nlocaton = "x"\n', "locaton"),
])
def test_a_bad_lake_table_in_a_pipeline_file_is_refused_naming_its_key(tmp_path, lake, message):
    with pytest.raises(PipelineDefinitionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_pipeline(homelab_copy(tmp_path, extra="\n" + lake), check_jobs=False, suites=False)


def scored_rows(ledger: Path, n: int, first: int = 0) -> None:
    from schemas.homelab import Scored

    with Source(str(ledger)) as source:
        source.topic("rss.scored", Scored, dedup=("url",)).extend([
            {"url": f"https://x/{i}", "title": f"t{i}", "kind": "video" if i % 2 else "article", "score": i / 7,
             "category": "maybe", "published": datetime(2026, 11, 1 + i % 4, 6, 30, tzinfo=UTC)}
            for i in range(first, first + n)])


def test_lake_sync_list_and_clean_from_the_command_line(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    pipeline = homelab_copy(tmp_path, extra=LAKE)
    scored_rows(tmp_path / "homelab.sqlite", 12)
    out = invoke("lake", "sync", "scored", "-p", str(pipeline))
    assert out.exit_code == 0, out.output
    assert "12 row(s) appended" in out.output
    out = invoke("lake", "sync", "scored", "-p", str(pipeline))
    assert "0 row(s) appended" in out.output  # a second sync writes nothing twice
    listed = json.loads(invoke("lake", "list", "--json", "-p", str(pipeline)).output)
    assert [(t["name"], t["topic"], t["last_id"]) for t in listed] == [("scored", "rss.scored", 12)]
    assert listed[0]["location"] == str(tmp_path / "lake" / "scored")
    out = invoke("lake", "clean", "scored", "--dry-run", "-p", str(pipeline))
    assert out.exit_code == 0 and "0 orphan file(s) (dry run, nothing deleted)" in out.output
    rows, types = read_three_ways(str(tmp_path / "homelab.sqlite"), "scored")["duckdb"]
    assert len(rows) == 12 and ("published", "timestamp[us, tz=UTC]") in types
    with Source(str(tmp_path / "homelab.sqlite")) as source:
        kinds = [r[0] for r in source.ledger.conn.execute("SELECT kind FROM _minikafka_runs ORDER BY rowid")]
    assert kinds == ["lake", "lake", "lake-clean"]  # every run of anything leaves a row


def test_lake_clean_of_an_unknown_target_names_it(tmp_path):
    scored_rows(tmp_path / "homelab.sqlite", 1)
    out = invoke("lake", "clean", "nope", "-s", str(tmp_path / "homelab.sqlite"))
    assert out.exit_code == 1 and "no lake target 'nope'" in out.output


def test_a_delta_lake_table_in_a_pipeline_file_becomes_a_delta_target(tmp_path):
    from minikafka.ledger.lake import DeltaTarget

    lake = '\n[lake.d]\nformat = "delta"\ntopic = "rss.scored"\nlocation = "lake/d"\npartition_by = "category"\n'
    target = load_pipeline(homelab_copy(tmp_path, extra=lake), check_jobs=False, suites=False).lake["d"]
    assert isinstance(target, DeltaTarget) and target.partition_by == ("category",)
    assert target.location == str(tmp_path / "lake" / "d")


def test_the_console_shows_a_topics_lake_table_with_its_last_snapshot(tmp_path, monkeypatch):
    import warnings

    pytest.importorskip("starlette")
    with warnings.catch_warnings():  # starlette's note that a later httpx package will replace httpx here
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from minikafka.console.app import create_app

    monkeypatch.syspath_prepend(str(ROOT))
    pipeline = homelab_copy(tmp_path, extra=LAKE)
    scored_rows(tmp_path / "homelab.sqlite", 4)
    assert invoke("lake", "sync", "scored", "-p", str(pipeline)).exit_code == 0
    with Source(str(tmp_path / "homelab.sqlite")) as source:
        snapshot = source.ledger.conn.execute("SELECT snapshot_id FROM _minikafka_lake_targets").fetchone()[0]
    with TestClient(create_app(tmp_path / "homelab.sqlite"), base_url="http://127.0.0.1") as c:
        page = c.get("/topics/rss.scored").text
    assert "Lake tables" in page and f"<td>{snapshot}</td>" in page and 'data-lake="scored"' in page


def test_lake_compact_and_expire_from_the_command_line_with_dry_runs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    pipeline = homelab_copy(tmp_path, extra=LAKE)
    for night in range(4):  # four syncs of one day's rows: four files in that day's partition
        scored_rows(tmp_path / "homelab.sqlite", 1, first=night * 4)
        assert invoke("lake", "sync", "scored", "-p", str(pipeline)).exit_code == 0
    out = invoke("lake", "compact", "scored", "--dry-run", "-p", str(pipeline))
    assert out.exit_code == 0 and "would compact: 4 data file(s), at most 4 in a partition" in out.output, out.output
    out = invoke("lake", "compact", "scored", "-p", str(pipeline))
    assert "compacted: 4 data file(s), at most 4 in a partition -> 1 file(s)" in out.output, out.output
    out = invoke("lake", "expire", "scored", "--older-than", "1ms", "--dry-run", "-p", str(pipeline))
    assert "snapshot(s) would be expired" in out.output and out.exit_code == 0, out.output
    assert invoke("lake", "expire", "scored", "--older-than", "soon", "-p", str(pipeline)).exit_code == 2
    assert invoke("lake", "expire", "scored", "--older-than", "1ms", "-p", str(pipeline)).exit_code == 0
    out = invoke("lake", "clean", "scored", "-p", str(pipeline))
    assert out.exit_code == 0 and len([line for line in out.output.splitlines() if line.endswith(".parquet")]) == 4
    assert len(read_three_ways(str(tmp_path / "homelab.sqlite"), "scored")["duckdb"][0]) == 4

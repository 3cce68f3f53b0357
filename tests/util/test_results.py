"""Every run result shares one base: ``as_dict()`` is JSON-ready and ``summary()`` is text."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from minikafka.api.core.requeue import RequeueResult
from minikafka.connectors.delivery import DeliverySummary, PartitionStats
from minikafka.connectors.ingest import IngestResult
from minikafka.ledger.consuming import RunResult
from minikafka.ledger.consuming.runlog_retention import PruneResult
from minikafka.pipelines.results import PipelineRun, StageOutcome
from minikafka.pipelines.watch import WatchResult
from minikafka.quality.validate import SuiteOutcome
from minikafka.util.results import Result, plain

RESULTS = [
    IngestResult(lines=3, appended=2, blank=1),
    PartitionStats("g", "orders", 0, delivered=5),
    DeliverySummary([PartitionStats("g", "orders", 0, delivered=5)], ["r1"], 0.5),
    RequeueResult(appended=1, failed=[(7, "bad")]),
    PruneResult(runs_deleted=2, kept_latest=["r9"]),
    WatchResult(seconds=1.5),
    StageOutcome("score", "failed", 2.0, {"rows_out": 0}, "boom"),
    PipelineRun("homelab", [StageOutcome("score", "succeeded", 1.0, {"rows_out": 3})], seconds=1.0),
    SuiteOutcome("items", "rss.items", "fail", False, [{"success": False, "row_level": False}]),
    RunResult("run-1", "stage", stage="score", rows_in=3, quality={"ok": True}).finish("succeeded"),
]


@pytest.mark.parametrize("result", RESULTS, ids=lambda r: type(r).__name__)
def test_every_result_gives_a_json_ready_dict_and_a_summary(result):
    assert isinstance(result, Result)
    text = json.dumps(result.as_dict())  # no TypeError: everything is JSON-ready
    assert json.loads(text) == result.as_dict()
    assert isinstance(result.summary(), str) and result.summary()
    assert str(result) == result.summary()


def test_the_run_result_classes_all_share_the_base():
    from minikafka.api.modes.workers import WorkResult
    from minikafka.spark.loading.backfill import BackfillResult

    for cls in (RunResult, WorkResult, BackfillResult, IngestResult, PartitionStats, DeliverySummary, RequeueResult, PruneResult, WatchResult):
        assert issubclass(cls, Result), cls.__name__


def test_plain_turns_times_paths_sets_and_nested_results_into_json_data():
    value = {"at": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc), "p": Path("/x/y"), "s": {3, 1},
             "nested": IngestResult(lines=1)}
    assert plain(value) == {"at": "2026-01-02T03:04:05+00:00", "p": "/x/y", "s": [1, 3],
                            "nested": IngestResult(lines=1).as_dict()}


def test_ingest_summary_names_the_file_when_given():
    r = IngestResult(lines=2, appended=2)
    assert r.summary("feed.jsonl").startswith("feed.jsonl: 2 lines")
    assert r.summary().startswith("2 lines")

"""topics, status, schema, consumers and prune: --json keys, run ids, retention."""

from __future__ import annotations

import json
import os
import time

from minikafka import Source
from minikafka.ledger.consuming import RunResult, write_run_in_current_transaction
from tests.cli.helpers import Item, invoke, seed


def test_topics_json_has_stable_keys(db_path):
    seed(db_path)
    out = invoke("topics", "--json", "--source", db_path)
    assert out.exit_code == 0
    [t] = json.loads(out.output)
    assert t == {"topic": "items", "new": 5, "handled": 0, "total": 5, "high_watermark": 5,
                 "consumers": ["clean"], "quarantined": 0, "partitions": 1,
                 "groups": [{"name": "clean", "partitions": [{"partition": 0, "committed": 0, "lag": 5}]}]}


def _runs(db_path, specs):
    with Source(db_path) as src:
        with src._ledger.atomic() as conn:
            for run_id, stage, status, started in specs:
                r = RunResult(run_id, "stage", stage=stage, consumer=stage, inputs=["items"], started_at=started)
                r.finish(status, "boom" if status == "failed" else None)
                write_run_in_current_transaction(conn, r)


def test_status_shows_run_ids_and_failed_only_with_failed(db_path):
    seed(db_path)
    _runs(db_path, [("r-ok", "clean", "succeeded", "2026-01-01T00:00:00.000000Z"),
                    ("r-bad", "clean", "failed", "2026-01-02T00:00:00.000000Z")])
    out = invoke("status", "--source", db_path)
    assert out.exit_code == 0 and "r-ok" in out.output and "r-bad" in out.output
    failed = invoke("status", "--failed", "--source", db_path)
    assert "r-bad" in failed.output and "r-ok" not in failed.output and "error: boom" in failed.output
    runs = json.loads(invoke("status", "--json", "--source", db_path).output)
    assert [r["run_id"] for r in runs] == ["r-bad", "r-ok"]
    assert {"run_id", "stage", "status", "rows_in", "started_at", "error", "quality"} <= set(runs[0])
    one = json.loads(invoke("status", "--run", "r-ok", "--json", "--source", db_path).output)
    assert [r["status"] for r in one] == ["succeeded"]


def test_status_says_when_every_input_row_went_to_the_quarantine(db_path):
    seed(db_path)
    with Source(db_path) as src, src._ledger.atomic() as conn:
        r = RunResult("r-q", "stage", stage="clean", inputs=["items"], rows_in=3, rows_quarantined=3)
        write_run_in_current_transaction(conn, r.finish("succeeded"))
    out = invoke("status", "--source", db_path)
    assert "all 3 input row(s) went to the quarantine: minikafka quarantine items" in out.output


def test_schema_lists_columns_and_dedup(db_path):
    seed(db_path)
    out = invoke("schema", "items", "--source", db_path)
    assert out.exit_code == 0 and "dedup: url" in out.output and "score" in out.output
    info = json.loads(invoke("schema", "items", "--json", "--source", db_path).output)
    assert info["dedup"] == ["url"] and info["model"].endswith(":Item")
    assert [(c["name"], c["kind"], c["nullable"]) for c in info["columns"]] == [
        ("title", "str", False), ("url", "str", False), ("score", "float", False), ("lang", "str", True)]
    sql = invoke("schema", "items", "--sql", "--source", db_path).output
    assert "CREATE TABLE" in sql and "STRICT" in sql


def test_consumers_lists_lag_and_last_activity(db_path):
    seed(db_path, consumers=("clean", "score"))
    with Source(db_path) as src:
        src.topic("items", Item, dedup=("url",)).set_handled(1, consumer="clean")
    rows = json.loads(invoke("consumers", "--json", "--source", db_path).output)
    by = {r["name"]: r for r in rows}
    assert by["clean"]["lag"] == 4 and by["clean"]["last_activity"] is not None
    assert by["score"]["lag"] == 5 and by["score"]["last_activity"] is None
    assert set(by["clean"]) == {"topic", "name", "created_at", "lag", "last_activity", "last_run_id", "in_pipeline"}


def test_consumers_drop_unregisters_and_settles_rows(db_path):
    seed(db_path, consumers=("clean", "retired"))
    with Source(db_path) as src:
        t = src.topic("items", Item, dedup=("url",))
        for i in (1, 2):
            t.set_handled(i, consumer="clean")
    out = invoke("consumers", "items", "--drop", "retired", "--source", db_path)
    assert out.exit_code == 0 and "dropped consumer retired from items; 2 row(s)" in out.output
    with Source(db_path) as src:
        t = src.topic("items", Item, dedup=("url",))
        assert t.consumers() == ["clean"] and t.count("handled") == 2
    again = invoke("consumers", "--drop", "retired", "--source", db_path)
    assert again.exit_code == 1 and "no consumer 'retired'" in again.output


def test_prune_deletes_old_runs_but_keeps_each_stages_latest(db_path, tmp_path):
    seed(db_path)
    _runs(db_path, [("old-1", "clean", "succeeded", "2020-01-01T00:00:00.000000Z"),
                    ("old-2", "clean", "failed", "2020-01-02T00:00:00.000000Z"),
                    ("only", "other", "succeeded", "2020-01-01T00:00:00.000000Z"),
                    ("new-1", "clean", "succeeded", "2999-01-01T00:00:00.000000Z")])
    reports = tmp_path / "quality-reports"
    reports.mkdir()
    (reports / "old.html").write_text("x")
    (reports / "new.html").write_text("x")
    old = time.time() - 40 * 86400
    os.utime(reports / "old.html", (old, old))
    out = invoke("prune", "--runs-older-than", "30d", "--reports-older-than", "30d", "--json", "--source", db_path)
    assert out.exit_code == 0
    assert json.loads(out.output) == {"runs_deleted": 2, "reports_deleted": 1, "kept_latest": ["only"]}
    with Source(db_path) as src:
        assert sorted(r["run_id"] for r in src.runs()) == ["new-1", "only"]
    assert [p.name for p in reports.iterdir()] == ["new.html"]


def test_prune_rejects_a_bad_age_as_a_usage_error(db_path):
    seed(db_path)
    out = invoke("prune", "--runs-older-than", "thirty", "--source", db_path)
    assert out.exit_code == 2 and "30d" in out.output
    assert invoke("prune", "--source", db_path).exit_code == 2


def test_consumers_with_pipeline_marks_consumers_no_stage_uses_as_retired(tmp_path):
    from tests.pipelines.helpers import homelab_copy

    pipeline = homelab_copy(tmp_path)
    assert invoke("run", pipeline, "--create").exit_code == 0  # nothing pending: registers the DAG's consumers, no JVM
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        src.register_consumers([("rss.items", "old_stage")])
    out = invoke("consumers", "--pipeline", pipeline, "--json")
    rows = {(r["topic"], r["name"]): r for r in json.loads(out.output)}
    assert rows[("rss.items", "old_stage")]["in_pipeline"] is False
    assert rows[("rss.items", "split_youtube")]["in_pipeline"] is True
    text = invoke("consumers", "--pipeline", pipeline)
    assert "retired" in text.output

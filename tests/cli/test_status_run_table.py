"""What ``status`` prints of the run log: quiet nights folded into one row per stage (``--all``
shows each), counts per topic for a stage of several inputs or outputs, and the same count
columns in the same order as ``run``."""

from __future__ import annotations

import json
import re

from minikafka import Source
from minikafka.ledger.consuming import RunResult, write_run_in_current_transaction
from minikafka.pipelines.results import PipelineRun, StageOutcome
from tests.cli.helpers import invoke, seed


def at(day: int, minute: int = 0) -> str:
    return f"2026-11-{day:02d}T02:{minute:02d}:00.000000Z"


def write(db_path, *runs: RunResult) -> None:
    with Source(db_path) as src, src.ledger.atomic() as conn:
        for run in runs:
            write_run_in_current_transaction(conn, run if run.status != "running" else run.finish("succeeded"))


def stage_run(run_id: str, stage: str, started_at: str, **counts) -> RunResult:
    return RunResult(run_id, "stage", stage=stage, inputs=["items"], outputs=["clean"], started_at=started_at,
                     **counts)


def quiet_nights(db_path, days=range(2, 22)) -> None:
    write(db_path, stage_run("load-busy", "load", at(1), rows_in=57, rows_out=57),
          stage_run("score-busy", "score", at(1, 1), rows_in=57, rows_out=44, rows_duplicate=13),
          *[stage_run(f"{stage}-{day:02d}", stage, at(day, i)) for day in days
            for i, stage in enumerate(("load", "score"))])


def test_twenty_quiet_nights_show_as_one_folded_row_in_status(db_path):
    seed(db_path, n=1)
    quiet_nights(db_path)
    out = invoke("status", "--source", db_path, "--limit", "20")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    runs = [line.split()[0] for line in lines[1:] if not line.startswith(" ")]
    assert runs == ["score-21", "load-21", "score-busy", "load-busy"]
    assert "quiet ×20" in lines[1]
    assert f"    quiet ×20 since {at(2, 1)}: succeeded, nothing new to read (status --all shows each run)" in lines


def test_status_json_gives_a_folded_rows_count_and_its_first_and_last_run(db_path):
    seed(db_path, n=1)
    quiet_nights(db_path)
    records = json.loads(invoke("status", "--source", db_path, "--json").output)
    assert [r["run_id"] for r in records] == ["score-21", "load-21", "score-busy", "load-busy"]
    assert records[1]["folded"] == {"count": 20, "first_run_id": "load-02", "first_started_at": at(2),
                                    "last_run_id": "load-21", "last_started_at": at(21)}
    assert records[2]["folded"] is None


def test_status_all_and_limit_show_every_run_and_count_shown_rows(db_path):
    seed(db_path, n=1)
    quiet_nights(db_path)
    every = json.loads(invoke("status", "--source", db_path, "--json", "--all", "--limit", "5").output)
    assert [r["run_id"] for r in every] == ["score-21", "load-21", "score-20", "load-20", "score-19"]
    assert all(r["folded"] is None for r in every)
    text = invoke("status", "--source", db_path, "--all", "--limit", "3").output
    assert "quiet" not in text and len(text.splitlines()) == 4
    two = json.loads(invoke("status", "--source", db_path, "--json", "--limit", "3").output)
    assert [r["run_id"] for r in two] == ["score-21", "load-21", "score-busy"]


def test_a_stage_with_two_outputs_reports_rows_per_output_topic_in_status(db_path):
    seed(db_path, n=1)
    by_topic = {"inputs": {"items": {"read": 5, "acked": 5, "failed": 0, "quarantined": 0}},
                "outputs": {"left": {"written": 3, "duplicate": 1, "quarantined": 0},
                            "right": {"written": 1, "duplicate": 0, "quarantined": 0}}}
    run = RunResult("split-1", "stage", stage="split", inputs=["items"], outputs=["left", "right"], started_at=at(3),
                    rows_in=5, rows_out=4, rows_duplicate=1, details={"rows_by_topic": by_topic})
    old = RunResult("split-0", "stage", stage="split", inputs=["items"], outputs=["left", "right"], started_at=at(2),
                    rows_in=2, rows_out=2)  # written before the counts per topic: sums only
    write(db_path, run, old)
    records = json.loads(invoke("status", "--source", db_path, "--json").output)
    assert records[0]["rows_by_topic"] == by_topic and records[1]["rows_by_topic"] is None
    text = invoke("status", "--source", db_path).output
    assert "    in: items 5; out: left 3 (1 duplicate), right 1" in text.splitlines()
    assert "split-0" in text and text.count("    in:") == 1


def ends(line: str) -> list[int]:
    return [m.end() for m in re.finditer(r"\S+", line)]


def test_run_and_status_print_the_same_columns_in_the_same_order(db_path):
    seed(db_path, n=1)
    counts = {"rows_in": 11, "rows_out": 22, "rows_duplicate": 33, "rows_quarantined": 44, "rows_failed": 55}
    write(db_path, stage_run("load-1", "load", at(1), status="partial", duration_s=1.5, **counts))
    status_lines = invoke("status", "--source", db_path).output.splitlines()
    row = {"run_id": "load-1", **counts}
    run_lines = PipelineRun("p", [StageOutcome("load", "partial", seconds=1.5, run=row)], seconds=2.0).table().splitlines()
    status_header, run_header = status_lines[0].split(), run_lines[0].split()
    assert status_header[:3] == ["run", "id", "started"]
    assert status_header[3:] == run_header  # stage status in out dup quar fail time
    status_cells, run_cells = status_lines[1].split(), run_lines[1].split()
    assert status_cells[2:] == run_cells
    assert run_cells[2:7] == ["11", "22", "33", "44", "55"]
    for header, values in ((status_lines[0], status_lines[1]), (run_lines[0], run_lines[1])):
        assert ends(header)[-6:] == ends(values)[-6:], (header, values)  # each count under its heading


def test_run_json_gives_each_stages_counts_per_topic_and_none_for_a_stage_that_recorded_none():
    by_topic = {"inputs": {"items": {"read": 2, "acked": 2, "failed": 0, "quarantined": 0}},
                "outputs": {"left": {"written": 1, "duplicate": 0, "quarantined": 0},
                            "right": {"written": 1, "duplicate": 0, "quarantined": 0}}}
    recorded = StageOutcome("split", "succeeded", run={"rows_in": 2, "details": json.dumps({"rows_by_topic": by_topic})})
    stages = PipelineRun("p", [recorded, StageOutcome("score", "skipped")]).as_dict()["stages"]
    assert stages[0]["rows_by_topic"] == by_topic and stages[1]["rows_by_topic"] is None

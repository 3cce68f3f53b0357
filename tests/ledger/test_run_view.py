"""The run view: consecutive quiet runs of a stage (succeeded, nothing read, written or set
aside) fold into one shown row; ``limit`` counts shown rows; the stored rows stay as they
were; the walk uses the run log's indexes, so its cost follows what is shown, not history."""

from __future__ import annotations

import pytest

from minikafka import Source
from minikafka.ledger.consuming import RunResult, read_runs, runview, write_run_in_current_transaction


def at(day: int, minute: int = 0) -> str:
    return f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}T02:{minute:02d}:00.000000Z"


def log(src: Source, run_id: str, stage: str, started_at: str, *, rows_in: int = 0, rows_out: int = 0,
        status: str = "succeeded", kind: str = "stage", quarantined: int = 0) -> None:
    run = RunResult(run_id, kind, stage=stage, inputs=["a"], outputs=["b"], started_at=started_at,
                    rows_in=rows_in, rows_out=rows_out, rows_quarantined=quarantined)
    with src.ledger.atomic() as conn:
        write_run_in_current_transaction(conn, run.finish(status, "boom" if status == "failed" else None))


def nights(src: Source, first: int, count: int, stages=("load", "score")) -> None:
    """``count`` quiet nights from day ``first``: a run of each stage, nothing new."""
    for day in range(first, first + count):
        for i, stage in enumerate(stages):
            log(src, f"{stage}-{day:04d}", stage, at(day, i))


def shown(rows) -> list[tuple]:
    return [(r["run_id"], (r["folded"] or {}).get("count")) for r in rows]


def test_twenty_quiet_nights_show_as_one_folded_row_per_stage(source):
    log(source, "load-busy", "load", at(0), rows_in=57, rows_out=57)
    log(source, "score-busy", "score", at(0, 1), rows_in=57, rows_out=50)
    nights(source, 1, 20)
    rows = runview.folded_runs(source.ledger.conn, limit=20)
    assert shown(rows) == [("score-0020", 20), ("load-0020", 20), ("score-busy", None), ("load-busy", None)]
    fold = rows[0]["folded"]
    assert fold == {"count": 20, "first_run_id": "score-0001", "first_started_at": at(1, 1),
                    "last_run_id": "score-0020", "last_started_at": at(20, 1)}
    # the ledger keeps every row: folding is a reading concern
    assert len(read_runs(source.ledger.conn, limit=1000)) == 42


def test_limit_counts_shown_rows_so_twenty_rows_are_twenty_things_that_happened(source):
    for day in range(0, 60, 3):  # a busy night every third night, two quiet nights between
        log(source, f"load-busy-{day:02d}", "load", at(day), rows_in=day + 1, rows_out=day + 1)
        log(source, f"load-{day + 1:02d}", "load", at(day + 1))
        log(source, f"load-{day + 2:02d}", "load", at(day + 2))
    rows = runview.folded_runs(source.ledger.conn, limit=20)
    assert len(rows) == 20
    assert shown(rows)[:4] == [("load-59", 2), ("load-busy-57", None), ("load-56", 2), ("load-busy-54", None)]
    every = runview.folded_runs(source.ledger.conn, limit=20, fold=False)
    assert [r["run_id"] for r in every] == [r["run_id"] for r in read_runs(source.ledger.conn, limit=20)]
    assert all(r["folded"] is None for r in every)


def test_a_fold_cut_by_the_limit_still_counts_every_quiet_run_since_the_last_busy_one(source):
    log(source, "load-busy", "load", at(0), rows_in=3, rows_out=3)
    nights(source, 1, 30, stages=("load",))
    log(source, "other", "clean", at(40), rows_in=1, rows_out=1)
    rows = runview.folded_runs(source.ledger.conn, limit=2)
    assert shown(rows) == [("other", None), ("load-0030", 30)]
    assert rows[1]["folded"]["first_started_at"] == at(1)


def test_only_quiet_runs_fold_a_failure_a_quarantine_or_rows_read_break_the_fold(source):
    nights(source, 1, 3, stages=("load",))
    log(source, "load-failed", "load", at(4), status="failed")
    nights(source, 5, 2, stages=("load",))
    log(source, "load-quar", "load", at(7), quarantined=2)
    nights(source, 8, 2, stages=("load",))
    log(source, "load-read", "load", at(10), rows_in=4)  # read rows, wrote none (a filter): not quiet
    log(source, "load-single", "load", at(11))
    assert shown(runview.folded_runs(source.ledger.conn, limit=20)) == [
        ("load-single", None), ("load-read", None), ("load-0009", 2), ("load-quar", None), ("load-0006", 2),
        ("load-failed", None), ("load-0003", 3)]


def test_runs_that_mean_something_with_zero_rows_never_fold(source):
    for day in range(3):
        log(source, f"backup-{day}", "backup", at(day), kind="backup")
    assert shown(runview.folded_runs(source.ledger.conn, limit=20)) == [
        ("backup-2", None), ("backup-1", None), ("backup-0", None)]


def test_a_stage_filter_folds_that_stages_runs_and_a_day_filter_bounds_the_fold(source):
    log(source, "load-busy", "load", at(0), rows_in=1, rows_out=1)
    nights(source, 1, 10)
    conn = source.ledger.conn
    assert shown(runview.folded_runs(conn, stage="score", limit=5)) == [("score-0010", 10)]
    rows = runview.folded_runs(conn, stage="load", since=at(5)[:10], limit=5)
    assert shown(rows) == [("load-0010", 6)] and rows[0]["folded"]["first_run_id"] == "load-0005"


def test_a_kind_without_a_stage_is_found_by_its_kind(source):
    for day in range(3):
        run = RunResult(f"pipe-{day}", "pipeline", started_at=at(day))
        with source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, run.finish("succeeded"))
    assert shown(runview.folded_runs(source.ledger.conn, stage="pipeline", limit=5)) == [("pipe-2", 3)]


@pytest.mark.parametrize("filters", [{}, {"stage": "load"}, {"hide_kinds": ("health",)},
                                     {"since": "2026-01-05", "until": "2026-03-01T99"}])
def test_the_fold_walks_the_run_log_by_its_indexes_without_sorting_it(file_source, filters):
    nights(file_source, 1, 5)
    conn = file_source.ledger.conn
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        runview.folded_runs(conn, limit=3, **filters)
    finally:
        conn.set_trace_callback(None)
    selects = [s for s in seen if s.lstrip().upper().startswith("SELECT") and "_minikafka_runs" in s]
    assert selects
    for sql in selects:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
        assert not any("TEMP B-TREE" in step for step in plan), (sql, plan)
        for step in plan:  # no full scan of the table: a search, or a walk along an index in its order
            if "_minikafka_runs" in step:
                assert step.startswith("SEARCH") or "INDEX" in step, (sql, plan)


def _steps(conn, **kwargs) -> int:
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    conn.set_progress_handler(count, 1)
    try:
        runview.folded_runs(conn, **kwargs)
    finally:
        conn.set_progress_handler(None, 0)
    return steps[0]


def test_the_folds_cost_follows_what_is_shown_not_the_length_of_the_history(tmp_path):
    costs = []
    for history in (200, 4000):
        with Source(str(tmp_path / f"h{history}.sqlite")) as src:
            with src.ledger.atomic() as conn:
                for i in range(history):  # old busy runs, long before the quiet nights
                    run = RunResult(f"old-{i:05d}", "stage", stage=("load", "score")[i % 2],
                                    started_at=f"2020-01-01T00:00:00.{i:06d}Z", rows_in=1, rows_out=1)
                    write_run_in_current_transaction(conn, run.finish("succeeded"))
            nights(src, 1, 20)
            assert shown(runview.folded_runs(src.ledger.conn, limit=4))[:2] == [("score-0020", 20), ("load-0020", 20)]
            costs.append((_steps(src.ledger.conn, limit=4), _steps(src.ledger.conn, stage="load", limit=3)))
    (small, small_stage), (big, big_stage) = costs
    assert big < small * 1.5 and big_stage < small_stage * 1.5, costs

"""status shows whole run ids, and --run takes an id or a unique prefix of one."""

from __future__ import annotations

import json

from minikafka import Source
from minikafka.ledger.consuming import RunResult, write_run_in_current_transaction
from tests.cli.helpers import invoke, seed

LONG = "backfill-rss.items-20261123T113729Z-e6eb86db"
OTHER = "backfill-rss.items-20261123T113729Z-e6aa0000"
THIRD = "backfill-rss.items-20261124T090000Z-12345678"


def runs(db_path, *run_ids):
    seed(db_path, n=1)
    with Source(db_path) as src, src._ledger.atomic() as conn:
        for i, run_id in enumerate(run_ids):
            r = RunResult(run_id, "backfill", stage=None, inputs=["rss.items"],
                          started_at=f"2026-11-2{i}T00:00:00.000000Z")
            write_run_in_current_transaction(conn, r.finish("succeeded"))


def test_status_shows_whole_run_ids_that_paste_into_run(db_path):
    runs(db_path, LONG, THIRD)
    out = invoke("status", "--source", db_path)
    assert out.exit_code == 0, out.output
    shown = [line.split()[0] for line in out.output.splitlines()[1:]]
    assert shown == [THIRD, LONG]
    one = invoke("status", "--run", shown[1], "--json", "--source", db_path)
    assert one.exit_code == 0 and [r["run_id"] for r in json.loads(one.output)] == [LONG]


def test_status_run_accepts_a_unique_prefix(db_path):
    runs(db_path, LONG, OTHER, THIRD)
    out = invoke("status", "--run", "backfill-rss.items-20261123T113729Z-e6e", "--json", "--source", db_path)
    assert out.exit_code == 0, out.output
    assert [r["run_id"] for r in json.loads(out.output)] == [LONG]


def test_status_run_with_an_ambiguous_prefix_is_an_error_listing_the_candidates(db_path):
    runs(db_path, LONG, OTHER, THIRD)
    out = invoke("status", "--run", "backfill-rss.items-20261123T113729Z-e6", "--source", db_path)
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert "begins 2 run ids" in out.output and LONG in out.output and OTHER in out.output
    assert THIRD not in out.output


def test_status_run_matching_nothing_names_it(db_path):
    runs(db_path, LONG)
    out = invoke("status", "--run", "score-2026", "--source", db_path)
    assert out.exit_code == 1 and "no run 'score-2026'" in out.output

"""Kill a real stage process that writes into a keyed table with SIGKILL at every fault point
of its merge commit; re-run: versions, current map, superseded marks, acks and run rows are
those of one clean run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.spark import run_stage
from minikafka.util.faults import ENV, MODE_ENV
from tests.ledger.test_keyed import copy_ledger
from tests.spark.crash_child_keyed import Item, open_topics, stage

pytestmark = [pytest.mark.spark, pytest.mark.slow]

N = 1000
ROOT = Path(__file__).resolve().parents[2]


def kill_at(path: str, point: str) -> None:
    """Start the stage's process, SIGKILL it once it is frozen at ``point`` (util/faults)."""
    env = {**os.environ, ENV: point, "PYTHONPATH": str(ROOT)}
    env.pop(MODE_ENV, None)
    proc = subprocess.Popen([sys.executable, "-m", "tests.spark.crash_child_keyed", path], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in proc.stderr:
        if line.startswith(f"FROZEN {point}"):
            break
    else:
        proc.wait()
        pytest.fail(f"the stage process ended before reaching {point} (exit {proc.returncode})")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def night(path: str, n: int) -> None:
    with Source(path) as src:
        open_topics(src)
        src.topic("items", Item, dedup=("url",)).extend([{"url": f"u{n}-{i}", "n": i * n} for i in range(N)])


def snapshot(path: str) -> dict:
    with Source(path) as src:
        open_topics(src)
        conn = src.ledger.conn
        runs = [(r["rows_in"], r["rows_out"], r["rows_duplicate"], r["details"]["tables"])
                for r in src.runs(stage="buckets", limit=50) if r["status"] == "succeeded" and r["rows_in"]]
        return {
            "versions": conn.execute('SELECT "_id", bucket, total, rows, last_url, "_parent_topic" FROM buckets '
                                     'ORDER BY "_id"').fetchall(),
            "current": conn.execute('SELECT k, id FROM "buckets__current" ORDER BY k, id').fetchall(),
            "superseded": conn.execute('SELECT id, by FROM "buckets__superseded" ORDER BY id').fetchall(),
            "view": conn.execute('SELECT bucket, total, rows FROM "buckets:current" ORDER BY bucket').fetchall(),
            "items_new": src.topic("items", Item, dedup=("url",)).count("new"),
            "runs": runs,
        }


@pytest.fixture(scope="module")
def nights(tmp_path_factory, spark):
    """A ledger after night 1's run with night 2's items waiting, and the snapshot of a clean night 2."""
    base = tmp_path_factory.mktemp("keyed-crash")
    before, clean = str(base / "before.sqlite"), str(base / "clean.sqlite")
    night(before, 1)
    with Source(before) as src:
        open_topics(src)
        run_stage(spark, src, stage())
    night(before, 2)
    copy_ledger(before, clean)
    with Source(clean) as src:
        open_topics(src)
        run_stage(spark, src, stage())
    return before, snapshot(clean)


@pytest.mark.parametrize("point", ["stage:staged", "keyed:versions-inserted", "keyed:current-updated",
                                   "commit:outputs-inserted", "commit:before-commit", "commit:after-commit"])
def test_a_stage_merging_into_a_table_killed_at_any_fault_point_then_rerun_gives_the_clean_ledger(
        spark, tmp_path, nights, point):
    before, expected = nights
    path = str(tmp_path / "ledger.sqlite")
    copy_ledger(before, path)
    kill_at(path, point)
    with Source(path) as src:
        open_topics(src)
        run_stage(spark, src, stage())
        run_stage(spark, src, stage())  # and once more: nothing left to do
    assert snapshot(path) == expected
    assert expected["items_new"] == 0 and len(expected["superseded"]) == 7  # night 2 changed every bucket
    assert expected["view"] == [(b, sum(i * k for k in (1, 2) for i in range(N) if i * k % 7 == b),
                                 sum(1 for k in (1, 2) for i in range(N) if i * k % 7 == b)) for b in range(7)]

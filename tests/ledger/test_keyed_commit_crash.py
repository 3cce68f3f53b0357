"""kill -9 at every fault point of a stage's merge commit (``commit_stage`` with an output that
is a keyed table, beside a plain output), then a re-run: versions, current map, superseded
marks, acks and run rows are those of a run never killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.util.faults import ENV
from tests.ledger.test_keyed import Daily, Fact, copy_ledger

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys
import pyarrow as pa
from minikafka import Source
from minikafka.ledger.consuming import RunResult
from minikafka.ledger.topics import acks
from minikafka.ledger.transactions import InputState, StagedOutput, commit_stage
from tests.ledger.test_keyed import Daily, Fact
run_id = sys.argv[2]
with Source(sys.argv[1]) as src:
    facts = src.topic("facts", Fact, dedup=None)
    table = src.table("daily", Daily, key=("carrier", "day"), merge={"n": "sum"})
    copies = src.topic("copies", Fact, dedup=None)
    conn = src.ledger.conn
    cid = acks.find_consumer(conn, "facts", "agg")
    pending = list(facts.iter_new(records=True, consumer="agg"))
    upto = max([r.id for r in pending], default=0)
    cols = {"carrier": [r.data.carrier for r in pending], "day": [r.data.day.isoformat() for r in pending],
            "n": pa.array([r.data.n for r in pending], pa.int64()),
            "_parent_id": pa.array([r.id for r in pending], pa.int64())}
    half = len(pending) // 2
    rows = pa.record_batch(cols)
    run = RunResult(run_id, "stage", stage="agg", consumer="agg", inputs=["facts"], outputs=["daily", "copies"])
    commit_stage(src.ledger, run, consumer="agg", inputs=[InputState("facts", upto, len(pending), consumer_id=cid)],
                 outputs=[StagedOutput(table.layout, iter([rows.slice(0, half), rows.slice(half)])),
                          StagedOutput(copies.layout, [rows])], default_parent_topic="facts")
"""


def run_child(path: str, run_id: str, point: str | None = None) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(ENV, None)
    if point is None:
        subprocess.run([sys.executable, "-c", CHILD, path, run_id], cwd=ROOT, env=env, check=True,
                       capture_output=True)
        return
    env[ENV] = point
    proc = subprocess.Popen([sys.executable, "-c", CHILD, path, run_id], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.time() + 60
    for line in proc.stderr:
        if line.startswith("FROZEN") or time.time() > deadline:
            break
    else:
        proc.wait()
        pytest.fail(f"the child ended before reaching {point} (exit {proc.returncode})")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def night(path: str, n: int) -> None:
    with Source(path) as src:
        facts = src.topic("facts", Fact, dedup=None)
        src.table("daily", Daily, key=("carrier", "day"), merge={"n": "sum"})
        src.topic("copies", Fact, dedup=None)
        facts.consumer("agg")
        facts.extend([{"carrier": c, "day": date(2024, 1, 1 + (i % 3)), "n": (i + n) % 4} for i, c in enumerate("AABCCA")]
                     + [{"carrier": "Z", "day": date(2024, 2, n), "n": 1}])


def dump(path: str) -> dict:
    with Source(path) as src:
        conn = src.ledger.conn
        runs = [(r["status"], r["rows_in"], r["rows_out"], r["rows_duplicate"], (r["details"] or {}).get("tables"))
                for r in src.runs(stage="agg", limit=50)]
        return {
            "versions": conn.execute('SELECT "_id", carrier, day, n, "_parent_id", "_parent_topic", "_run_id" '
                                     'FROM daily ORDER BY "_id"').fetchall(),
            "current": conn.execute('SELECT k, id FROM "daily__current" ORDER BY k, id').fetchall(),
            "superseded": conn.execute('SELECT id, by FROM "daily__superseded" ORDER BY id').fetchall(),
            "copies": conn.execute('SELECT "_id", carrier, day, n, "_parent_id", "_run_id" FROM copies '
                                   'ORDER BY "_id"').fetchall(),
            "acks": conn.execute("SELECT a.* FROM _minikafka_acks a ORDER BY 1").fetchall()
            if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = '_minikafka_acks'").fetchone() else None,
            "pending": src.topic("facts", Fact, dedup=None).count("new", consumer="agg"),
            "runs": runs,
            "marks": conn.execute("SELECT * FROM _minikafka_row_counts WHERE topic IN ('daily', 'copies') "
                                  "ORDER BY 1, 2").fetchall(),
            "view": conn.execute('SELECT carrier, day, n FROM "daily:current" ORDER BY carrier, day').fetchall(),
        }


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """A ledger after night 1's commit with night 2's facts waiting, and the dump of a clean night 2."""
    base = tmp_path_factory.mktemp("keyed-commit-nights")
    before, clean = str(base / "before.sqlite"), str(base / "clean.sqlite")
    night(before, 1)
    run_child(before, "night-1")
    night(before, 2)
    copy_ledger(before, clean)
    run_child(clean, "night-2")
    return before, dump(clean)


@pytest.mark.parametrize("point", ["keyed:versions-inserted", "keyed:current-updated", "commit:outputs-inserted",
                                   "commit:before-commit", "commit:after-commit"])
def test_a_merge_commit_killed_at_any_fault_point_then_rerun_leaves_the_ledger_of_a_run_never_killed(
        tmp_path, nights, point):
    before, expected = nights
    killed = str(tmp_path / "killed.sqlite")
    copy_ledger(before, killed)
    run_child(killed, "night-2", point)
    # the re-run (after commit:after-commit it finds nothing pending and records an empty run of its own)
    run_child(killed, "night-2-again" if point == "commit:after-commit" else "night-2")
    got = dump(killed)
    if point == "commit:after-commit":  # the re-run committed an empty run of its own
        assert got["runs"][0][1:3] == (0, 0)
        got["runs"] = got["runs"][1:]
    assert got == expected
    assert expected["pending"] == 0 and expected["superseded"]  # night 2 changed keys of night 1
    assert expected["runs"][0][0] == "succeeded" and expected["runs"][0][4]["daily"]["updated"] > 0

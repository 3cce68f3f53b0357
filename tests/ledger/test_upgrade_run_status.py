"""Format 3 -> 4: the run log takes the status 'interrupted'; every run of the file keeps its row.

``tests/data/ledger_format3.sqlite`` was written by minikafka before format 4: topic
``videos`` (3 rows), consumer ``a``, and one succeeded run ``stage-20250101T000000Z-00000001``.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.ledger.consuming import INTERRUPTED, RunResult, write_run_in_current_transaction
from minikafka.ledger.transactions import LEDGER_FORMAT
from tests.conftest import Video

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "ledger_format3.sqlite"
OLD_RUN = "stage-20250101T000000Z-00000001"


@pytest.fixture
def old_file(tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, path)
    return str(path)


def test_a_format_3_file_is_upgraded_keeping_its_runs_and_takes_interrupted_runs(old_file):
    with Source(old_file) as src:
        assert src.ledger.upgraded_from == 3
        (old,) = src.runs()
        assert (old["run_id"], old["status"], old["rows_out"]) == (OLD_RUN, "succeeded", 3)
        run = RunResult("stage-x", "stage", stage="clean")
        run.finish("interrupted", INTERRUPTED)
        with src.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, run)
        assert [r["status"] for r in src.runs(stage="clean")] == ["interrupted", "succeeded"]
        assert src.topic("videos", Video, dedup=("url",)).count("new", consumer="a") == 3
    conn = sqlite3.connect(old_file)
    assert conn.execute("SELECT value FROM _minikafka_meta WHERE key = 'format'").fetchone() == (str(LEDGER_FORMAT),)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema")}
    assert "_minikafka_runs_by_stage" in names and not any(n.startswith("_minikafka_runs_before") for n in names)
    with Source(old_file) as src:  # a second open finds nothing left to upgrade
        assert src.ledger.upgraded_from is None and len(src.runs()) == 2


def test_the_run_log_still_refuses_a_status_it_does_not_know(db_path):
    with Source(db_path) as src:
        run = RunResult("stage-y", "stage", stage="clean")
        run.finish("exploded")
        with pytest.raises(sqlite3.IntegrityError), src.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, run)

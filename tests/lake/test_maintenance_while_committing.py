"""Lake maintenance (compact, expire, clean) while another process's stage commits write the
same Iceberg table: every commit and every maintenance step lands, the table ends equal to the
ledger, no file a snapshot reaches is deleted, and the three readers agree."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")

from minikafka import Source  # noqa: E402
from minikafka.ledger.lake import (  # noqa: E402
    IcebergTarget,
    compact,
    declare,
    expire_snapshots,
    reader_catalog,
    remove_orphans,
)

from .lake_writer import Item  # noqa: E402
from .readers import read_three_ways  # noqa: E402
from .test_iceberg_commit import ledger_rows  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_compact_expire_and_clean_while_another_process_commits_lose_nothing(tmp_path):
    ledger = str(tmp_path / "l.db")
    with Source(ledger) as source:
        source.topic("night", Item, dedup=("n",))
        declare(source.ledger, [IcebergTarget("night", "night", str(tmp_path / "lake" / "night"),
                                              partition_by=("bucket",))])
    env = dict(os.environ, PYTHONPATH=str(REPO))
    writer = subprocess.Popen([sys.executable, "-m", "tests.lake.lake_writer", "race", ledger, "night", "12"],
                              cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    steps = {"compacted": 0, "expired": 0, "cleaned": 0}
    with Source(ledger, busy_timeout=120) as source:
        while writer.poll() is None or steps["compacted"] == 0:
            try:
                done = compact(source.ledger, "night", max_files=1)
            except Exception as exc:  # noqa: BLE001 - the table may not exist before the first commit
                assert "has no table yet" in str(exc), exc
                continue
            steps["compacted"] += done.done
            soon = datetime.now(UTC) + timedelta(seconds=1)
            steps["expired"] += expire_snapshots(source.ledger, "night", older_than=soon).done
            steps["cleaned"] += len(remove_orphans(source.ledger, "night"))
    assert writer.wait(timeout=300) == 0, writer.stderr.read()
    with Source(ledger) as source:  # the last commits after the last round of maintenance
        compact(source.ledger, "night", max_files=1)
    assert steps["compacted"] >= 1 and steps["expired"] >= 1 and steps["cleaned"] >= 1, steps
    rows = read_three_ways(ledger, "night")
    assert rows["pyiceberg"][0] == ledger_rows(ledger, "night", Item, ("n",))
    assert len(rows["pyiceberg"][0]) == 12 * 50 and len({r[0] for r in rows["pyiceberg"][0]}) == 600
    assert rows["duckdb"] == rows["pyiceberg"] == rows["polars"]
    table = reader_catalog(ledger).load_table("minikafka.night")
    files = {f["file_path"] for f in table.inspect.files().to_pylist()}
    assert all(Path(f.removeprefix("file://")).exists() for f in files)  # nothing a snapshot reaches was removed

"""Compaction never takes a keyed table's version that a stage run in progress may still read
as of its plan's snapshot (a lookup, a context read)."""

from __future__ import annotations

from pydantic import BaseModel

from minikafka import Source
from minikafka.ledger.consuming import RunResult, new_run_id, start_run_in_current_transaction
from minikafka.ledger.consuming.runlog import write_run_in_current_transaction
from minikafka.ledger.topics.lookups import lookup_bounds


class Station(BaseModel):
    id: int
    name: str


def test_compaction_keeps_a_version_a_running_stage_may_still_read_as_of_its_snapshot(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        stations = src.table("stations", Station, key=("id",))
        stations.upsert_many([{"id": 1, "name": "old one"}, {"id": 2, "name": "two"}])
        conn = src.ledger.conn
        run = RunResult(new_run_id("enrich"), "stage", stage="enrich")
        with src.ledger.atomic():
            start_run_in_current_transaction(conn, run)  # its 'running' row names this (live) process
        with src.ledger.atomic():
            bounds = lookup_bounds(conn, stations.layout)  # the stage's plan: its snapshot

        def as_of_snapshot() -> list[tuple]:
            return conn.execute(f'SELECT id, name FROM stations WHERE {bounds.where} ORDER BY id').fetchall()

        assert as_of_snapshot() == [(1, "old one"), (2, "two")]
        stations.upsert({"id": 1, "name": "new one"})  # supersedes the version the running stage reads
        assert src.compact_tables() == {"stations": 0}
        assert stations.compact() == 0
        assert as_of_snapshot() == [(1, "old one"), (2, "two")]  # the stage still reads its snapshot whole

        with src.ledger.atomic():
            write_run_in_current_transaction(conn, run.finish("succeeded"))
        assert src.compact_tables() == {"stations": 1}  # no run in progress: the superseded version goes
        assert sorted((s.id, s.name) for s in stations.iter_current()) == [(1, "new one"), (2, "two")]


def test_a_running_row_whose_process_is_gone_protects_nothing(tmp_path):
    import json

    with Source(str(tmp_path / "l.sqlite")) as src:
        stations = src.table("stations", Station, key=("id",))
        stations.upsert({"id": 1, "name": "old"})
        run = RunResult(new_run_id("enrich"), "stage", stage="enrich")
        conn = src.ledger.conn
        with src.ledger.atomic():
            start_run_in_current_transaction(conn, run)
            details = json.loads(conn.execute("SELECT details FROM _minikafka_runs WHERE run_id = ?",
                                              (run.run_id,)).fetchone()[0])
            details["process"]["pid"] = 2 ** 22 + 17  # a pid no process holds: the run was killed
            details["process"].pop("lock", None)
            conn.execute("UPDATE _minikafka_runs SET details = ? WHERE run_id = ?", (json.dumps(details), run.run_id))
        stations.upsert({"id": 1, "name": "new"})
        assert src.compact_tables() == {"stations": 1}

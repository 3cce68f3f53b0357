"""quarantine requeue exits 1, naming the rows and why, when every row still fails."""

from __future__ import annotations

import json

from minikafka import Source
from tests.cli.helpers import invoke

MODEL = "tests.cli.helpers:Item"
GOOD = '{"title": "a", "url": "ua", "score": 0.5}\n'
BAD = '{"title": "b", "url": "ub", "score": "high"}\n'
WORSE = '{"title": "c", "url": "uc", "score": "low"}\n'


def _ingest(db_path, text):
    invoke("ingest", "--create", "--source", db_path, "--model", MODEL, "--dedup", "url", "items", "-", input=text)
    with Source(db_path, read_only=True) as src:
        return sorted(q["id"] for q in src.quarantined("items"))


def test_quarantine_requeue_exits_1_naming_each_row_when_every_row_still_fails(db_path):
    ids = _ingest(db_path, GOOD + BAD + WORSE)
    out = invoke("quarantine", "items", "requeue", *ids, "--source", db_path)
    assert out.exit_code == 1, out.output
    assert "requeued 0 row(s)" in out.stdout
    assert "Error: no row of items could be requeued: all 2 still fail" in out.stderr
    for qid in ids:
        assert f"  {qid}: still invalid: score:" in out.stderr
    with Source(db_path, read_only=True) as src:
        assert sorted(q["id"] for q in src.quarantined("items")) == ids
        assert all(q["attempts"] == 2 for q in src.quarantined("items"))
        assert len(src._conn.execute('SELECT _id FROM "items"').fetchall()) == 1


def test_quarantine_requeue_all_with_json_exits_1_when_every_row_still_fails(db_path):
    _ingest(db_path, GOOD + BAD)
    out = invoke("quarantine", "items", "requeue", "--all", "--json", "--source", db_path)
    assert out.exit_code == 1
    result = json.loads(out.stdout)
    assert result["appended"] == 0 and result["still_failing"][0]["reason"].startswith("still invalid")
    assert "could be requeued" in out.stderr and "Traceback" not in out.stderr


def test_quarantine_requeue_exits_0_when_some_rows_are_requeued_and_others_still_fail(db_path):
    ids = _ingest(db_path, GOOD + BAD + WORSE)
    with Source(db_path) as src, src._ledger.atomic() as conn:
        conn.execute("UPDATE _minikafka_quarantine SET payload = ? WHERE id = ?",
                     ('{"title": "c", "url": "uc", "score": 1}', ids[1]))
    out = invoke("quarantine", "items", "requeue", *ids, "--source", db_path)
    assert out.exit_code == 0, out.output
    assert "requeued 1 row(s)" in out.output and f"still quarantined {ids[0]}" in out.output
    with Source(db_path, read_only=True) as src:
        assert [q["id"] for q in src.quarantined("items")] == [ids[0]]


def test_quarantine_requeue_with_nothing_quarantined_exits_0(db_path):
    _ingest(db_path, GOOD)
    out = invoke("quarantine", "items", "requeue", "--all", "--source", db_path)
    assert out.exit_code == 0 and "requeued 0 row(s)" in out.output

"""``health`` and a failed stage's error: every path (text, --json, its run row, the notification)
shows the error with its secrets masked, also when the run row holding it was written by an older
version that kept it verbatim."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from minikafka import Source
from minikafka.ledger.consuming import COLUMNS, RunResult, read_runs, write_run_in_current_transaction
from tests.connectors.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
SECRETS = ("Pw0rdSecretAlpha", "sk-live-bearer-0123456789", "correct horse battery staple", "hook-tok-4455667788")
ERROR = (f"POST https://bob:{SECRETS[0]}@db.example/v1 failed: 401 (Authorization: Bearer {SECRETS[1]}); "
         f'sent {{"password": "{SECRETS[2]}"}}')


def _plant_verbatim_failed_run(ledger: str) -> None:
    """A failed stage run whose error holds secrets, kept verbatim (as a version before masking did)."""
    run = RunResult("run-20300101T000000Z-leaky000", "stage", stage="nightly", status="failed", error=ERROR,
                    started_at="2030-01-01T00:00:00.000000Z", finished_at="2030-01-01T00:01:00.000000Z")
    row = dict(zip(COLUMNS, [None] * len(COLUMNS)))
    row.update({k: v for k, v in run.as_row().items()})
    row["error"] = ERROR
    with sqlite3.connect(ledger) as conn:
        conn.execute(f"INSERT INTO _minikafka_runs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})",
                     tuple(row[c] for c in COLUMNS))
    conn.close()


def _health(ledger: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka.cli", "health", "-s", ledger, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _leaks(text: str) -> list[str]:
    words = [w for s in SECRETS for w in (s, *s.split()) if len(w) >= 5]
    return [w for w in words if w in text]


def test_health_masks_a_failed_stages_error_in_its_text_json_run_row_and_notification(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    Source(ledger).close()
    _plant_verbatim_failed_run(ledger)
    text = _health(ledger)
    assert text.returncode == 1, text.stderr
    assert "db.example" in text.stdout and "***" in text.stdout
    assert _leaks(text.stdout + text.stderr) == []
    with ScriptedServer([200]) as server:
        url = server.url + f"?token={SECRETS[3]}"
        done = _health(ledger, "--json", "--notify", url)
        plain = _health(ledger, "--notify-format", "text", "--notify", server.url.replace("http://", "http://x:y@"))
    assert done.returncode == 1 and plain.returncode == 1, done.stderr + plain.stderr
    assert _leaks(done.stdout + done.stderr + plain.stdout + plain.stderr) == []
    report = json.loads(done.stdout)
    assert report["checks"][0]["state"] == "fail" and "db.example" in report["checks"][0]["reason"]
    assert report["notified"][0]["delivered"] is True
    sent = json.dumps([r.body for r in server.requests])
    assert len(server.requests) >= 1 and "db.example" in sent and _leaks(sent) == []
    with Source(ledger) as source:
        rows = [r for r in read_runs(source.ledger.conn, limit=10) if r["kind"] == "health"]
    assert rows and _leaks(json.dumps(rows)) == []


def test_a_failed_runs_error_and_details_reach_the_ledger_masked(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    with Source(ledger) as source:
        run = RunResult("run-20300101T000000Z-masked00", "stage", stage="nightly",
                        details={"endpoint": f"https://bob:{SECRETS[0]}@db.example/v1",
                                 "sent": {"api_key": SECRETS[3]}, "repr": f"{{'password': '{SECRETS[2]}'}}"})
        run.finish("failed", ERROR)
        with source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, run)
        (row,) = read_runs(source.ledger.conn, run_id=run.run_id)
    assert "db.example" in row["error"] and row["details"]["sent"] == {"api_key": "***"}
    assert _leaks(run.summary()) == []
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("l.sqlite"))
    assert _leaks(stored.decode("latin-1")) == []

"""Health notifications: POSTed to a real HTTP server on 127.0.0.1, on state changes only, retried,
with the webhook's secrets kept out of output and the ledger."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.connectors.notify import notify
from minikafka.ledger.consuming import RunResult, write_run_in_current_transaction
from minikafka.ledger.transactions import Ledger
from minikafka.pipelines.health import check_health
from minikafka.util.clock import format_timestamp
from tests.connectors.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
SECRET = "tk_live_9f8e7d6c5b4a"


def _stage_run(ledger: str, status: str, when: datetime) -> None:
    run = RunResult(f"nightly-{when:%H%M%S}", "stage", stage="nightly", status=status,
                    started_at=format_timestamp(when), finished_at=format_timestamp(when))
    led = Ledger(ledger)
    with led.atomic() as conn:
        write_run_in_current_transaction(conn, run)
    led.close()


def test_a_message_is_retried_with_backoff_until_the_receiver_takes_it():
    waits = []
    with ScriptedServer([503, "close", 200]) as server:
        outcome = notify(server.url, {"state": "fail"}, "fail", attempts=4, sleep=waits.append)
    assert outcome.delivered and outcome.attempts == 3
    assert len(waits) == 2 and waits[1] > waits[0] * 1.2
    assert [r.body for r in server.requests] == [{"state": "fail"}] * 3


def test_a_client_error_is_not_retried_and_the_url_secrets_never_show():
    url_secret = f"?auth={SECRET}"
    with ScriptedServer([401]) as server:
        outcome = notify(server.url.replace("http://", f"http://user:{SECRET}@") + url_secret, {"x": 1}, "x",
                         sleep=lambda s: None)
    assert not outcome.delivered and outcome.attempts == 1
    assert "401" in outcome.describe()
    assert SECRET not in outcome.describe() and SECRET not in outcome.url and SECRET not in repr(outcome)


def test_the_text_format_sends_one_plain_line_for_ntfy_style_receivers():
    with ScriptedServer([200]) as server:
        notify(server.url, {"ignored": True}, "minikafka health night: FAIL", fmt="text", sleep=lambda s: None)
    request = server.requests[0]
    assert request.body == {"_raw": "minikafka health night: FAIL"}
    assert request.headers["Content-Type"].startswith("text/plain")


def test_health_notifies_when_a_state_changes_and_not_on_every_check(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    Source(ledger).close()
    _stage_run(ledger, "succeeded", T0)
    with ScriptedServer([200]) as server:
        first = check_health(ledger, notify_urls=(server.url,), sleep=lambda s: None)
        assert server.requests == [] and first.changed == []  # every check ok, as assumed before
        _stage_run(ledger, "failed", T0 + timedelta(hours=1))
        failing = check_health(ledger, notify_urls=(server.url,), sleep=lambda s: None)
        again = check_health(ledger, notify_urls=(server.url,), sleep=lambda s: None)
        _stage_run(ledger, "succeeded", T0 + timedelta(hours=2))
        recovered = check_health(ledger, notify_urls=(server.url,), sleep=lambda s: None)
    assert failing.changed == [{"name": "stage nightly last run", "from": "ok", "to": "fail",
                                "reason": failing.checks[0].reason}]
    assert again.changed == [] and again.state == "fail"
    assert [c["to"] for c in recovered.changed] == ["ok"]
    bodies = [r.body for r in server.requests]
    assert [b["state"] for b in bodies] == ["fail", "ok"]
    assert bodies[0]["checks"][0]["name"] == "stage nightly last run"


def test_an_undelivered_notification_is_sent_again_by_the_next_health_run(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    Source(ledger).close()
    _stage_run(ledger, "failed", T0)
    with ScriptedServer([500]) as server:
        missed = check_health(ledger, notify_urls=(server.url,), attempts=2, sleep=lambda s: None)
        server.script = [200]
        retried = check_health(ledger, notify_urls=(server.url,), attempts=2, sleep=lambda s: None)
    assert not missed.notified[0].delivered and missed.notified[0].attempts == 2
    assert retried.notified[0].delivered and retried.changed and len(server.requests) == 3


def test_the_cli_never_shows_the_webhook_secret_in_output_or_the_ledger(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    Source(ledger).close()
    _stage_run(ledger, "failed", T0)
    with ScriptedServer([200]) as server:
        url = server.url.replace("http://", f"http://bot:{SECRET}@") + f"?token={SECRET}"
        done = subprocess.run([sys.executable, "-m", "minikafka.cli", "health", "-s", ledger, "--notify", url,
                               "--json"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert SECRET not in done.stdout and SECRET not in done.stderr
    report = json.loads(done.stdout)
    assert report["notified"][0]["delivered"] is True
    assert report["checks"][0]["state"] == "fail"
    assert SECRET not in Path(ledger).read_bytes().decode("latin-1")
    wal = Path(ledger + "-wal")
    assert not wal.exists() or SECRET not in wal.read_bytes().decode("latin-1")


def test_a_notify_url_that_is_not_http_is_refused_before_anything_runs(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    Source(ledger).close()
    with pytest.raises(ValueError, match="http:// or https://"):
        check_health(ledger, notify_urls=("ftp://example.com/x",))


def test_an_unknown_notify_format_is_refused_before_anything_runs(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    Source(ledger).close()
    with pytest.raises(ValueError, match="notify format must be one of"):
        check_health(ledger, notify_format="xml")


def test_notify_headers_arrive_with_every_notification_and_only_their_names_are_logged(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    Source(ledger).close()
    _stage_run(ledger, "failed", T0)
    env = {**__import__("os").environ, "HOOK_KEY": f"k-{SECRET}"}
    with ScriptedServer([503, 200]) as server:
        done = subprocess.run([sys.executable, "-m", "minikafka.cli", "health", "-s", ledger, "--notify", server.url,
                               "--notify-header", f"Authorization: Bearer {SECRET}",
                               "--notify-header-env", "X-Hook-Key=HOOK_KEY", "--json"],
                              cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1, done.stderr
    assert [r.headers["Authorization"] for r in server.requests] == [f"Bearer {SECRET}"] * 2  # the retry too
    assert [r.headers["X-Hook-Key"] for r in server.requests] == [f"k-{SECRET}"] * 2
    assert json.loads(done.stdout)["notified"][0]["delivered"] is True
    assert SECRET not in done.stdout + done.stderr
    led = Ledger(ledger)
    details = led.conn.execute("SELECT details FROM _minikafka_runs WHERE kind = 'health'").fetchone()[0]
    led.close()
    assert json.loads(details)["headers"] == ["Authorization", "X-Hook-Key"]
    assert SECRET not in Path(ledger).read_bytes().decode("latin-1")


@pytest.mark.parametrize("args, message", [
    (["--notify-header", f"Bearer {SECRET}"], "notify header #1 must look like 'Name: value'"),
    (["--notify-header", f"Bearer {SECRET}:{SECRET}"], "notify header #1 must look like 'Name: value'"),
    (["--notify-header-env", f"Authorization: Bearer {SECRET}"], "environment #1 must look like 'Name=ENVVAR'"),
    (["--notify-header", f"Authorization: Bearer {SECRET}", "--notify-header", f"authorization: {SECRET}"],
     "header 'authorization' is given twice"),
    (["--notify-header-env", "Authorization=MINIKAFKA_TEST_UNSET_VAR"],
     "header 'Authorization': the environment variable MINIKAFKA_TEST_UNSET_VAR is not set"),
    (["--notify-header-env", "Authorization"], "environment #1 must look like 'Name=ENVVAR'"),
])
def test_a_bad_notify_header_is_refused_naming_it_never_its_value(tmp_path, args, message):
    ledger = str(tmp_path / "l.sqlite")
    Source(ledger).close()
    done = subprocess.run([sys.executable, "-m", "minikafka.cli", "health", "-s", ledger,
                           "--notify", "http://127.0.0.1:9/hook", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert SECRET not in done.stdout + done.stderr
    with Source(ledger) as src:
        assert src.runs(stage="health") == []  # refused before anything was checked


def test_a_notify_header_without_a_url_is_refused(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    Source(ledger).close()
    done = subprocess.run([sys.executable, "-m", "minikafka.cli", "health", "-s", ledger,
                           "--notify-header", f"Authorization: {SECRET}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "a header needs a --notify URL" in done.stderr
    with pytest.raises(ValueError, match=r"notify headers \(Authorization\) need a notify URL"):
        check_health(ledger, notify_headers={"Authorization": SECRET})

"""A URL password, a query token and a header value never leave minikafka, in any encoding.

The secrets are planted in every HTTP path the project has (the delivery worker from Python
and from the CLI, ``HTTPSink`` in a streaming loop, a refused connection), against a real
HTTP server on 127.0.0.1 that is as careless as a receiver can be: it answers 500 with the
request line and every request header, each also base64- and URL-encoded, in its body and
in a response header. Then every output, every log record (root logger at DEBUG, httpx's
and httpcore's own included) and every byte of the ledger's files are searched for each
secret in each encoding.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.connectors import HTTPSink
from minikafka.connectors.delivery import DeliverySpec, DeliveryWorker
from minikafka.connectors.http import HttpPoster
from minikafka.errors import ConnectorError, DeliveryConfigError, WindowFailedError

from ..util.ports import unused_port

ROOT = Path(__file__).resolve().parents[2]

USER = "bob"
PASSWORD = "hunter2/pass+Q7x"  # '/' and '+' change under URL and base64 encodings
TOKEN = "tok/9+XzQ=Lm4"
HEADER = "apikey-5Rm/Zq+w=="


def _forms(secret: str) -> set[str]:
    raw = secret.encode()
    b64 = base64.b64encode(raw).decode()
    url64 = base64.urlsafe_b64encode(raw).decode()
    return {secret, quote(secret, safe=""), quote(secret), quote_plus(secret), b64, b64.rstrip("="), url64,
            url64.rstrip("=")}


FORBIDDEN = sorted(set().union(*(_forms(s) for s in (PASSWORD, TOKEN, HEADER, f"{USER}:{PASSWORD}"))), key=len)


def assert_clean(text: str, where: str) -> None:
    found = [f for f in FORBIDDEN if f in text]
    assert not found, f"{where} shows a secret as {found}"


def ledger_bytes(db: str) -> str:
    """Every byte of the ledger's files (main file, WAL, shared memory), as text."""
    out = []
    for suffix in ("", "-wal", "-shm"):
        p = Path(db + suffix)
        if p.exists():
            out.append(p.read_bytes().decode("latin-1"))
    return "\n".join(out)


class Careless:
    """Answers 500 quoting everything it got, each header also base64- and URL-encoded."""

    def __init__(self):
        self.seen: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = dict(self.headers)
                owner.seen.append({"path": self.path, **headers})
                auth = headers.get("Authorization", "")
                decoded = base64.b64decode(auth.split()[-1]).decode() if auth.startswith("Basic ") else ""
                echo = {"request": f"POST {self.path}", "headers": headers, "basic_decoded": decoded,
                        "b64": {k: base64.b64encode(v.encode()).decode() for k, v in headers.items()},
                        "urlenc": {k: quote(v, safe="") for k, v in headers.items()}}
                body = json.dumps(echo).encode()
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Echo", quote(json.dumps(headers), safe=""))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{USER}:{quote(PASSWORD, safe='')}@{host}:{self.port}/ingest?token={quote(TOKEN, safe='')}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Order(BaseModel):
    n: int


@pytest.fixture
def careless():
    server = Careless()
    yield server
    server.close()


@pytest.fixture
def every_record():
    """Every log record of every logger, formatted with its arguments, at DEBUG on the root logger."""
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(f"{record.name} {record.getMessage()} {record.exc_text or ''}")

    root = logging.getLogger()
    handler, level = Keep(logging.DEBUG), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield records
    root.removeHandler(handler)
    root.setLevel(level)


def test_a_password_token_and_header_value_reach_no_output_log_record_or_ledger_byte(tmp_path, careless,
                                                                                        every_record):
    db = str(tmp_path / "ledger.sqlite")
    with Source(db) as src:
        src.topic("orders", Order, dedup=None).extend([{"n": i} for i in range(2)])
        src.stream("events").extend([{"i": 1}])
    spec = DeliverySpec(name="shipper", topic="orders", endpoint=careless.url(), headers={"X-Api-Key": HEADER},
                        batch_size=2, interval=0.01, timeout=2.0, max_backoff=0.01, max_attempts=2)
    shown = [repr(spec)]
    summary = DeliveryWorker(db, [spec], once=True).run()
    shown += summary.lines()

    sink = HTTPSink(careless.url(), headers={"X-Api-Key": HEADER}, max_attempts=1)
    shown.append(repr(sink))
    with Source(db) as src, pytest.raises(WindowFailedError) as failed:
        src.streaming("events", lambda w: [{"i": 1}], size=1, sink=sink, until_idle=True, max_attempts=1,
                      consumer="poster")
    shown.append(str(failed.value))
    sink.close()

    refused = HttpPoster(f"http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{unused_port()}/x?token="
                         f"{quote(TOKEN, safe='')}", headers={"X-Api-Key": HEADER}, timeout=2)
    outcome = refused.post_json({"n": 1})
    refused.close()
    shown.append(outcome.describe())

    # the receiver did get every secret: the test planted them where they travel
    first = careless.seen[0]
    assert first["X-Api-Key"] == HEADER and quote(TOKEN, safe="") in first["path"]
    assert first["Authorization"] == "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert summary.quarantined == 2 and not outcome.ok
    with Source(db) as src:
        reasons = [q["reason"] for q in src.quarantined("orders")]
        runs = json.dumps(src.runs(limit=20), default=str)
    assert reasons and all("HTTP 500" in r for r in reasons)
    assert any(r.startswith("httpx ") for r in every_record), "httpx logged nothing: the test would prove nothing"
    assert any(r.startswith("httpcore.") for r in every_record)
    assert_clean("\n".join(shown), "what the calls return or raise")
    assert_clean("\n".join(reasons) + runs, "the quarantine or the run log")
    assert_clean("\n".join(every_record), "a log record")
    assert_clean(ledger_bytes(db), "the ledger file")


def test_the_deliver_command_shows_and_logs_no_secret_with_logging_at_debug(tmp_path, careless):
    db = str(tmp_path / "ledger.sqlite")
    with Source(db) as src:
        src.topic("orders", Order, dedup=None).extend([{"n": i} for i in range(2)])
    conf = tmp_path / "deliveries.toml"
    conf.write_text("\n".join([
        f'source = "{db}"', "[[deliveries]]", 'name = "shipper"', 'topic = "orders"',
        f'endpoint = "{careless.url()}"', 'interval = "10ms"', 'max_backoff = "10ms"', "max_attempts = 2",
        'headers = { X-Api-Key = "${SHIP_KEY}" }']) + "\n")
    # the application logs everything at DEBUG to stderr, as a service's own logging set-up might
    debug_cli = ("import logging, sys; logging.basicConfig(level=logging.DEBUG, stream=sys.stderr); "
                 "from minikafka.cli import main; main()")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SHIP_KEY": HEADER}
    texts = []
    for args in (["deliver", str(conf), "--once"], ["deliver", str(conf), "--once", "--json"],
                 ["quarantine", "orders", "--json", "--source", db], ["status", "--source", db]):
        proc = subprocess.run([sys.executable, "-c", debug_cli, *args], env=env, capture_output=True, text=True,
                              timeout=120)
        texts += [proc.stdout, proc.stderr]
        assert "Traceback" not in proc.stderr, proc.stderr
    joined = "\n".join(texts)
    assert "HTTP Request: POST" in joined  # httpx did log, at INFO, through the application's handler
    assert "HTTP 500" in joined
    assert_clean(joined, "the CLI's output or logs")
    assert_clean(ledger_bytes(db), "the ledger file")


def test_user_info_and_an_authorization_header_together_are_refused_naming_both_never_their_values(tmp_path):
    url = f"http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:9/x"
    with pytest.raises(ValueError, match="both .*user info.*Authorization") as err:
        HttpPoster(url, headers={"authorization": f"Bearer {HEADER}"})
    with pytest.raises(ConnectorError, match="Authorization") as err2:
        HTTPSink(url, headers={"Authorization": f"Bearer {HEADER}"})
    db = str(tmp_path / "ledger.sqlite")
    with Source(db) as src:
        src.topic("orders", Order, dedup=None)
    with pytest.raises(DeliveryConfigError, match="Authorization") as err3:
        DeliveryWorker(db, [DeliverySpec(name="s", topic="orders", endpoint=url,
                                         headers={"Authorization": f"Bearer {HEADER}"})], once=True).run()
    assert_clean(f"{err.value} {err2.value} {err3.value}", "the refusal")


def test_a_health_notification_header_value_reaches_no_output_log_record_or_ledger_byte(tmp_path, careless,
                                                                                        every_record):
    from minikafka.ledger.consuming import RunResult, write_run_in_current_transaction
    from minikafka.pipelines.health import check_health

    db = str(tmp_path / "ledger.sqlite")
    with Source(db) as source:  # a failed stage run: the check fails, a notification goes out
        run = RunResult("r1", "stage", stage="nightly")
        run.finish("failed", "boom")
        with source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, run)
    result = check_health(db, notify_urls=(careless.url(),), attempts=2, sleep=lambda s: None,
                          notify_headers={"X-Api-Key": HEADER, "X-Hook-Token": f"Token {TOKEN}"})
    assert careless.seen and all(seen["X-Api-Key"] == HEADER for seen in careless.seen)  # it arrived, twice
    assert not result.notified[0].delivered and "500" in result.notified[0].error
    assert_clean(json.dumps(result.as_dict()) + result.summary() + repr(result), "the health result")
    assert_clean("\n".join(every_record), "a log record")
    assert_clean(ledger_bytes(db), "the ledger")

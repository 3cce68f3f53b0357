"""HTTPSink: a streaming consumer's output POSTed to a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from minikafka.connectors import HTTPSink
from minikafka.errors import ConnectorError, WindowFailedError


class Receiver:
    """Answers the scripted statuses in turn (then 200) and records every request."""

    def __init__(self, statuses: list[int]):
        self.statuses = list(statuses)
        self.requests: list[tuple[str | None, dict]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append((self.headers.get("Idempotency-Key"), body))
                status = owner.statuses.pop(0) if owner.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"no" if status >= 300 else b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ingest"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made = []

    def make(statuses=()):
        made.append(Receiver(list(statuses)))
        return made[-1]

    yield make
    for r in made:
        r.close()


def test_http_sink_posts_each_window_with_an_idempotency_key_and_retries_errors(source, receiver):
    server = receiver([500])
    source.stream("events").extend([{"i": i} for i in range(4)])
    sink = HTTPSink(server.url, backoff_base=0.01)
    source.streaming("events", lambda w: [{"sum": sum(d["i"] for d in w.data)}], consumer="web", size=2,
                     sink=sink, until_idle=True)
    keys = [k for k, _ in server.requests]
    assert keys == ["web/events/window-1/1-2", "web/events/window-1/1-2", "web/events/window-2/3-4"]
    assert [b["messages"] for _, b in server.requests[1:]] == [[{"sum": 1}], [{"sum": 5}]]
    sink.close()


def test_an_endpoint_that_keeps_failing_fails_the_window_which_stays_open(source, receiver):
    server = receiver([503] * 10)
    source.stream("events").extend([{"i": 0}])
    sink = HTTPSink(server.url, max_attempts=2, backoff_base=0.01)
    with pytest.raises(WindowFailedError, match=r"did not accept web/events/window-1/1-1 after 2 attempt\(s\): HTTP 503"):
        source.streaming("events", lambda w: w.data, consumer="web", size=1, sink=sink, until_idle=True,
                         max_attempts=1)
    assert source.stream("events").count("new", consumer="web") == 1
    sink.close()


def test_a_bad_endpoint_is_refused():
    with pytest.raises(ConnectorError, match="http:// or https://"):
        HTTPSink("ftp://example.com/x")


SECRET = "SECRET-51d0e2"


def test_a_header_value_an_http_library_cannot_send_is_refused_without_showing_it():
    for value in (f"Bearer {SECRET}\r", f"Bearer {SECRET}\n", f" Bearer {SECRET}", f"Bearer\x00{SECRET}"):
        with pytest.raises(ConnectorError, match="header 'Authorization'") as err:
            HTTPSink("http://127.0.0.1:9/x", headers={"Authorization": value})
        assert SECRET not in str(err.value)


def test_an_endpoint_quoting_the_credentials_back_never_gets_them_into_errors_windows_or_logs(file_source, caplog):
    from tests.connectors.scripted_server import ScriptedServer

    file_source.stream("events").extend([{"i": 0}])
    with ScriptedServer(["echo"]) as server, caplog.at_level("DEBUG"):
        sink = HTTPSink(server.url, headers={"Authorization": f"Bearer {SECRET}"}, max_attempts=2,
                        backoff_base=0.01)
        with pytest.raises(WindowFailedError) as err:
            file_source.streaming("events", lambda w: w.data, consumer="web", size=1, sink=sink, until_idle=True,
                                  max_attempts=1)
        sink.close()
    assert server.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert "HTTP 500" in str(err.value) and SECRET not in str(err.value) and SECRET not in repr(sink)
    windows = file_source._ledger.conn.execute("SELECT * FROM _minikafka_windows").fetchall()
    assert windows and SECRET not in str(windows) and SECRET not in caplog.text

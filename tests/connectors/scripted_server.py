"""A real HTTP server on 127.0.0.1 for connector tests, answering from a script.

Each POST takes the next step of ``script`` (the last one repeats): an int is a status
to answer, ``"hang"`` sleeps past the client's timeout before answering 200 (the
client gives up first), ``"close"`` drops the connection without an answer, ``"echo"``
answers 500 with the request's headers in the body (a careless server quoting the
credentials back). ``delay`` seconds pass before every answer. Every request is
recorded (headers, JSON body, the step it got).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    headers: dict
    body: dict
    step: object


class ScriptedServer:
    def __init__(self, script=(200,), *, hang_seconds: float = 1.0, delay: float = 0.0):
        self.script = list(script) or [200]
        self.hang_seconds = hang_seconds
        self.delay = delay
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                with outer._lock:
                    step = outer.script.pop(0) if len(outer.script) > 1 else outer.script[0]
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        body = {"_raw": raw.decode("utf-8", "replace")}
                    outer.requests.append(Received(dict(self.headers), body, step))
                if outer.delay:
                    outer._stop.wait(outer.delay)
                if step == "hang":
                    outer._stop.wait(outer.hang_seconds)
                    step = 200
                if step == "echo":
                    step, echoed = 500, json.dumps(dict(self.headers)).encode()
                else:
                    echoed = None
                if step == "close":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                payload = echoed or (b'{"ok": true}' if step < 300 else f"server error {step}: try later".encode())
                try:
                    self.send_response(int(step))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (timeout): nothing to answer
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/ingest"

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def wait_for(self, n: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.requests) < n and time.monotonic() < deadline:
            time.sleep(0.01)

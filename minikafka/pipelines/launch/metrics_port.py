"""The ``/metrics`` port of an engine ``minikafka serve`` runs (``--metrics-port``).

A Spark Connect server speaks gRPC only, so the engine's Prometheus text is served by a
small HTTP server in the ``serve`` process, on the engine's host: what the engine alone
knows (``observe.engine_metrics``), then, with ``--pipeline``, the figures of that pipeline's
ledger exactly as ``minikafka metrics --pipeline`` prints them (read from the ledger at each
scrape). It answers GET ``/metrics`` and nothing else; like the engine, it has no
authentication and listens on 127.0.0.1 unless ``--host`` says otherwise.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ...errors import EngineError, LedgerError
from ...util.redact import redact_and_cut, redact_url


class _Handler(BaseHTTPRequestHandler):
    server: _MetricsServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("?", 1)[0] != "/metrics":
            self._send(404, "text/plain; charset=utf-8", b"not found: the engine serves /metrics only\n")
            return
        from ...observe.prometheus import CONTENT_TYPE

        try:
            body = self.server.render().encode("utf-8")
        except Exception as exc:  # noqa: BLE001 - a scrape never takes the engine down; the serve log says why
            print(f"metrics: a scrape failed: {type(exc).__name__}: {redact_and_cut(exc, 300, first_line=True)}",
                  file=sys.stderr)
            self._send(500, "text/plain; charset=utf-8", b"the engine could not read its figures\n")
            return
        self._send(200, CONTENT_TYPE, body)

    def _send(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - scrapes are not logged
        return


class _MetricsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int]):
        super().__init__(address, _Handler)
        self.render: Callable[[], str] = lambda: ""


def bind(host: str, port: int) -> _MetricsServer:
    """The metrics server bound to ``host``:``port`` (0: any free port), not serving yet.

    Raises:
        EngineError: the port is taken or cannot be bound.
    """
    try:
        return _MetricsServer((host, port))
    except OSError as exc:
        raise EngineError(f"metrics port {port} on {host} cannot be used ({exc.strerror or exc}): give another "
                          "with --metrics-port N") from None


def start(server: _MetricsServer, render: Callable[[], str]) -> str:
    """Serve ``render()``'s text at /metrics in a daemon thread; returns the URL."""
    server.render = render
    threading.Thread(target=server.serve_forever, name="minikafka-engine-metrics", daemon=True).start()
    host, port = server.server_address[:2]
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://{shown}:{port}/metrics"


def stop(server: _MetricsServer) -> None:
    server.shutdown()
    server.server_close()


def engine_text(path: Path, state, defn) -> str:
    """The exposition of the engine recorded at ``path`` (``state``) and of ``defn``'s ledger."""
    from ...observe.engine_metrics import EngineFacts, render_engine
    from ...spark import engines

    facts = EngineFacts(redact_url(state.master), state.started_at,
                        engines.idle_timeout_of(state, engines.read_lease(path)), engines.stops_in(path, state),
                        len(engines.served(path, state)), engines.rss_bytes(state.jvm_pid))
    text = render_engine(facts)
    if defn is None or not Path(defn.source).exists():
        return text
    from ...observe.scrape import PipelineScope, exposition

    scope = PipelineScope(defn.name, tuple(s.name for s in defn.stages), defn.health.backups)
    try:
        return text + exposition(defn.source, [scope])
    except LedgerError:  # busy past the scrape's timeout, or not a ledger: the engine's figures still answer
        return text

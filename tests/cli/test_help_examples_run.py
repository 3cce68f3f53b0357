"""Every command's --help ends with an example, and that example runs on the shipped example.

The scenario is the repository's example after the nightly tutorial's first step: conf/,
schemas/, jobs/ and examples/ copied to a scratch directory, examples/feed.jsonl ingested
into the pipeline's ledger, every stage's consumer registered (plus one a renamed stage left
behind), a work queue with jobs, the shop ledger the deliveries file names and a receiver on
its endpoint. Commands run as a user types them (bash, the checkout's minikafka), with
``MINIKAFKA_SOURCE=data/homelab.sqlite`` as the CLI reference says; each must exit 0 and
print something. The four Spark commands run after the example pipeline ran once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from minikafka import Source
from minikafka.cli import main

from ..docs.runner import Session

SPARK_COMMANDS = {"run", "check", "watch", "backfill", "serve", "nightly"}  # nightly: its run may start one
LONG_RUNNING = {"watch", "serve"}  # run until SIGTERM: stopped once they printed their first line
SERVERS = {"ui"}  # serve until SIGTERM: stopped once they printed their address
SHIPPED_ENDPOINT = "http://127.0.0.1:18080/orders"  # examples/deliveries.toml's endpoint


def help_examples() -> dict[str, str]:
    """The example of every command, from its help text (wrapped lines joined)."""
    out = {}
    for name, command in sorted(main.commands.items()):
        text = command.help or ""
        m = re.search(r"Example:\s*(.+?)(?:\n\s*\n|\Z)", text, re.S)
        out[name] = " ".join(m.group(1).split()) if m else ""
    return out


EXAMPLES = help_examples()


class _Receiver(BaseHTTPRequestHandler):
    bodies: list = []

    def do_POST(self):
        self.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def _env(session: Session) -> dict[str, str]:
    # run's help example under the suite's engine (one spark-submit per stage): with the default
    # (auto) it would leave a warm engine up for its idle timeout, and serve's example would be refused
    return {**session.env(), "MINIKAFKA_SOURCE": "data/homelab.sqlite", "ORDERS_TOKEN": "example-token",
            "MINIKAFKA_ENGINE": os.environ.get("MINIKAFKA_ENGINE", "submit")}


def _bash(session: Session, command: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -e -o pipefail\n{command}"], cwd=session.dir, env=_env(session),
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    from examples.myjobs import Summarise
    from minikafka.pipelines.definition import load_pipeline
    from minikafka.pipelines.opening import open_source
    from schemas.homelab import RssItem

    session = Session(tmp_path_factory.mktemp("help-examples"))
    ingest = _bash(session, "minikafka ingest conf/homelab.toml rss.items examples/feed.jsonl")
    assert ingest.returncode == 0, ingest.stdout
    defn = load_pipeline(session.dir / "conf" / "homelab.toml")
    with open_source(defn, register=True):
        pass
    with Source(session.dir / "data" / "homelab.sqlite") as source:
        source.topic("rss.items", RssItem, dedup=("url",)).consumer("old_summary")  # a stage renamed since
        queue = source.queue("rss.summarise", Summarise)
        queue.enqueue({"url": "https://example.com/a", "body": "An article to summarise."})
        queue.enqueue({"url": "https://example.com/b", "body": "Another one."})
    with Source(session.dir / "data" / "shop.sqlite") as shop:
        from pydantic import BaseModel

        class Order(BaseModel):
            order_id: int
            user: str
            amount: float

        orders = shop.topic("orders", Order, dedup=("order_id",), partitions=2, key=("user",))
        orders.extend([{"order_id": i, "user": f"user-{i % 3}", "amount": 1.0 + i} for i in range(6)])
    # the receiver listens on a port of its own, and the scratch copy of the deliveries file names
    # it: a fixed port would collide with the delivery how-to (or anything else on this machine)
    # restore's example reads what backup's example writes: the scenario holds one snapshot
    # already, so the two run in any order (and on either xdist worker)
    backup = _bash(session, EXAMPLES["backup"])
    assert backup.returncode == 0, backup.stdout
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    deliveries = session.dir / "examples" / "deliveries.toml"
    shipped = deliveries.read_text()
    assert SHIPPED_ENDPOINT in shipped, "examples/deliveries.toml no longer names the endpoint this test serves"
    deliveries.write_text(shipped.replace(SHIPPED_ENDPOINT, f"http://127.0.0.1:{server.server_port}/orders"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield session
    server.shutdown()
    server.server_close()
    session.close()


@pytest.fixture(scope="module")
def ran_example(example, spark):
    """The example after one in-process run of its pipeline (the shared SparkSession)."""
    from minikafka.pipelines.definition import load_pipeline
    from minikafka.pipelines.runner import run_pipeline

    result = run_pipeline(load_pipeline(example.dir / "conf" / "homelab.toml"), in_process=True, echo=lambda *_: None)
    assert not result.failed, [o.error for o in result.outcomes]
    return example


def test_every_command_help_ends_with_an_example():
    missing = [name for name, example in EXAMPLES.items() if not example.startswith(("minikafka ", "cat "))]
    assert not missing, f"commands whose --help has no runnable example: {missing}"
    assert set(EXAMPLES) >= SPARK_COMMANDS


@pytest.mark.parametrize("name", sorted(set(EXAMPLES) - SPARK_COMMANDS - SERVERS))
def test_help_example_runs_on_the_shipped_example(name, example):
    proc = _bash(example, EXAMPLES[name], timeout=120)
    assert proc.returncode == 0, f"{EXAMPLES[name]}\n{proc.stdout}"
    assert proc.stdout.strip(), f"{EXAMPLES[name]} printed nothing"


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(SPARK_COMMANDS - LONG_RUNNING))
def test_spark_help_example_runs_on_the_shipped_example(name, ran_example):
    proc = _bash(ran_example, EXAMPLES[name], timeout=600)
    assert proc.returncode == 0, f"{EXAMPLES[name]}\n{proc.stdout}"
    assert proc.stdout.strip(), f"{EXAMPLES[name]} printed nothing"


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(LONG_RUNNING))
def test_long_running_help_example_runs_until_sigterm_and_exits_0(name, ran_example):
    code, first, rest = _until_sigterm(EXAMPLES[name], ran_example, 300)
    assert first.strip(), f"{name} printed nothing before it was stopped"
    assert code == 0, first + rest


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_server_help_example_serves_until_sigterm_and_exits_0(name, example):
    pytest.importorskip("uvicorn")
    command = EXAMPLES[name].replace("--port 8787", "--port 0")  # any free port: tests run side by side
    code, first, rest = _until_sigterm(command, example, 60)
    assert "http://127.0.0.1:" in first, first + rest
    assert code == 0, first + rest


def _until_sigterm(command: str, where, timeout: float) -> tuple[int, str, str]:
    """Run ``command`` in ``where``'s directory, send SIGTERM once it printed its first line
    (or ended), wait up to ``timeout``; (exit code, first line, the rest of its output).
    A process that outlives the test is killed."""
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=where.dir, env=_env(where),
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        first = proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, first, rest

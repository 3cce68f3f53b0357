"""The HTTP delivery worker under faults and misuse: two workers on one group, requeued
failures, secrets in headers and URLs, bad values in a deliveries file.

Real parts: an HTTP server on 127.0.0.1, ``minikafka`` CLI processes, SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.connectors.delivery import DeliverySpec, DeliveryWorker, load_deliveries
from minikafka.errors import DeliveryConfigError

from .scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
SECRET = "SECRET-7f3a9c"


class Order(BaseModel):
    user: str
    n: int


def fill(path, n=6, partitions=1):
    with Source(path) as src:
        src.topic("orders", Order, dedup=None, partitions=partitions).extend([{"user": f"u{i % 3}", "n": i}
                                                                              for i in range(n)])


def spec(url, **kw):
    base = dict(name="shipper", topic="orders", endpoint=url, batch_size=2, interval=0.01, timeout=2.0,
                max_backoff=0.05)
    return DeliverySpec(**{**base, **kw})


def cli(*args, env=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "minikafka.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run_cli(*args, env=None, timeout=60):
    proc = cli(*args, env=env)
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def deliveries_file(tmp_path, url, *, name="deliveries.toml", **extra):
    keys = {"name": '"shipper"', "topic": '"orders"', "endpoint": f'"{url}"', "batch_size": "2",
            "interval": '"20ms"', "max_backoff": '"50ms"', **extra}
    lines = ['source = "ledger.sqlite"', "[[deliveries]]"] + [f"{k} = {v}" for k, v in keys.items()]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def ledger_text(path) -> str:
    """Every value of every table of the ledger, as one text."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")]
        return "\n".join(str(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"'))
    finally:
        conn.close()


# -- two workers on one group -------------------------------------------------------------
def test_two_deliver_workers_on_one_group_send_each_row_once_and_never_under_two_keys(tmp_path):
    db = str(tmp_path / "ledger.sqlite")
    fill(db, 0, partitions=2)
    with ScriptedServer([200], delay=0.01) as server:
        path = deliveries_file(tmp_path, server.url, batch_size=5)
        workers = [cli("deliver", str(path)) for _ in range(2)]
        try:
            deadline = time.monotonic() + 30
            while True:  # both are up (each wrote its run) before any row exists
                with Source(db) as src:
                    if len([r for r in src.runs() if r["kind"] == "delivery"]) == 2:
                        break
                assert time.monotonic() < deadline and all(w.poll() is None for w in workers)
                time.sleep(0.05)
            fill(db, 200, partitions=2)
            deadline = time.monotonic() + 60
            while True:
                with Source(db) as src:
                    if sum(src.group("shipper").lag("orders").values()) == 0:
                        break
                assert time.monotonic() < deadline, "the workers did not deliver everything"
                time.sleep(0.05)
        finally:
            for w in workers:
                w.send_signal(signal.SIGTERM)
            results = [w.communicate(timeout=30) for w in workers]
        assert [w.returncode for w in workers] == [0, 0], results
    keys_of: dict[int, set[str]] = {}
    sent = []
    for r in server.requests:
        for m in r.body["messages"]:
            keys_of.setdefault(m["offset"], set()).add(r.headers["Idempotency-Key"])
            sent.append(m["offset"])
    assert len(keys_of) == 200
    assert [o for o, keys in keys_of.items() if len(keys) > 1] == []
    assert len(sent) == 200, "a row was sent twice"


def test_a_second_worker_with_once_skips_a_partition_another_worker_delivers(tmp_path):
    db = str(tmp_path / "ledger.sqlite")
    fill(db, 4)
    with ScriptedServer([200]) as server, Source(db) as src:
        from minikafka.ledger.consuming import deliveries as state

        cid = src.group("shipper")._consumer_id("orders", register=True)
        with src._ledger.atomic() as conn:  # a live worker elsewhere holds partition 0
            state.acquire_lease_in_current_transaction(conn, cid, 0, "elsewhere:1:x", int(time.time() * 1000),
                                                       60_000)
        summary = DeliveryWorker(db, [spec(server.url)], once=True).run()
    assert server.requests == [] and summary.delivered == 0 and not summary.errors
    assert "skipped: another worker delivers it (elsewhere:1:x)" in summary.lines()[0]


# -- requeueing what the delivery gave up on ------------------------------------------------
def test_requeueing_delivery_failures_makes_them_pending_for_the_group_and_they_are_delivered(tmp_path):
    db = str(tmp_path / "ledger.sqlite")
    fill(db, 4)
    with ScriptedServer([503, 503, 200]) as server:
        first = DeliveryWorker(db, [spec(server.url, max_attempts=2)], once=True).run()
        assert first.quarantined == 2 and first.delivered == 2
        code, out, err = run_cli("quarantine", "orders", "requeue", "--all", "--source", db,
                                 "--model", "tests.connectors.test_delivery_faults:Order")
        assert code == 0, err
        assert "2 pending again" in out and "0 already in the topic" in out and "0 appended" in out
        with Source(db) as src:
            assert src.quarantined("orders") == [] and src.topic("orders", Order, dedup=None).count() == 4
            assert src.group("shipper").lag("orders") == {0: 2}
        again = DeliveryWorker(db, [spec(server.url)], once=True).run()
    assert again.delivered == 2
    offsets = [[m["offset"] for m in r.body["messages"]] for r in server.requests if r.step == 200]
    assert offsets == [[3, 4], [1, 2]]
    with Source(db) as src:
        assert src.group("shipper").lag("orders") == {0: 0} and src.quarantined("orders") == []


# -- secrets -------------------------------------------------------------------------------
def test_a_header_value_with_a_stray_line_break_is_refused_and_never_shown_or_stored(tmp_path):
    db = str(tmp_path / "ledger.sqlite")
    fill(db, 2)
    with ScriptedServer([200]) as server:
        path = deliveries_file(tmp_path, server.url, headers='{ Authorization = "Bearer ${SHIP_TOKEN}" }')
        code, out, err = run_cli("deliver", str(path), "--once", env={"SHIP_TOKEN": f"{SECRET}\r"})
        assert code == 2 and "header 'Authorization'" in err and "line break" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
        literal = deliveries_file(tmp_path, server.url, name="literal.toml",
                                  headers='{ Authorization = "Bearer ' + SECRET + '\\r" }')
        code2, out2, err2 = run_cli("deliver", str(literal), "--once")
        assert code2 == 2 and "key 'headers'" in err2 and "header 'Authorization'" in err2
        status = run_cli("status", "--source", db)
        assert server.requests == []
    shown = "\n".join([out, err, out2, err2, *status[1:], ledger_text(db)])
    assert SECRET not in shown and "SECRET" not in shown


def test_a_server_quoting_the_credentials_back_never_gets_them_into_the_ledger_or_the_output(tmp_path, caplog):
    db = str(tmp_path / "ledger.sqlite")
    fill(db, 2)
    with ScriptedServer(["echo"]) as server, caplog.at_level("DEBUG"):
        d = spec(server.url, headers={"Authorization": f"Bearer {SECRET}"}, max_attempts=2)
        summary = DeliveryWorker(db, [d], once=True).run()
        code, out, err = run_cli("status", "--source", db)
        qcode, qout, qerr = run_cli("quarantine", "orders", "--source", db, "--json")
    assert summary.quarantined == 2 and server.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    with Source(db) as src:
        reason = src.quarantined("orders")[0]["reason"]
    assert "HTTP 500" in reason and "***" in reason
    shown = "\n".join([*summary.lines(), out, err, qout, qerr, caplog.text, ledger_text(db)])
    assert SECRET not in shown


def test_an_endpoint_with_a_wrong_scheme_or_port_is_shown_without_its_password(tmp_path):
    bad = deliveries_file(tmp_path, f"ftp://ann:{SECRET}@example.com/x?token={SECRET}")
    with pytest.raises(DeliveryConfigError) as err:
        load_deliveries(bad)
    assert "key 'endpoint'" in str(err.value) and "ftp://example.com/x" in str(err.value)
    assert SECRET not in str(err.value)
    code, out, err_text = run_cli("deliver", str(bad), "--once")
    assert code == 2 and SECRET not in out + err_text and "ftp://example.com/x" in err_text


# -- bad values in a deliveries file ----------------------------------------------------------
@pytest.mark.parametrize("extra, message", [
    ({"interval": "nan"}, r"key 'interval' must be a positive duration .*got nan"),
    ({"interval": "inf"}, r"key 'interval' must be a positive duration .*got inf"),
    ({"interval": "-1"}, r"key 'interval' must be a positive duration .*got -1"),
    ({"timeout": "-inf"}, r"key 'timeout' must be a positive duration .*got -inf"),
    ({"max_backoff": '"-5s"'}, r"key 'max_backoff' must be a positive duration .*got '-5s'"),
])
def test_a_nan_infinite_or_negative_duration_in_a_deliveries_file_is_a_clear_error(tmp_path, extra, message):
    with pytest.raises(DeliveryConfigError, match=message):
        load_deliveries(deliveries_file(tmp_path, "http://127.0.0.1:9/x", **extra))


def test_a_nan_interval_ends_the_cli_with_one_line_naming_the_key(tmp_path):
    fill(str(tmp_path / "ledger.sqlite"), 2)
    code, out, err = run_cli("deliver", str(deliveries_file(tmp_path, "http://127.0.0.1:9/x", interval="nan")),
                             "--once", timeout=30)
    assert code == 2 and "key 'interval'" in err and "nan" in err and "Traceback" not in err


def test_hours_work_as_a_delivery_duration(tmp_path):
    d = load_deliveries(deliveries_file(tmp_path, "http://127.0.0.1:9/x", max_backoff='"1h"')).deliveries[0]
    assert d.max_backoff == 3600.0


@pytest.mark.parametrize("endpoint, source, message", [
    ("http://127.0.0.1:99999/x", '"ledger.sqlite"', r"key 'endpoint'.*'http://127\.0\.0\.1:99999/x'.*invalid port"),
    ("http://127.0.0.1:9/x", "5", r"key 'source': must be the ledger's path as text, got 5"),
])
def test_a_bad_endpoint_port_or_source_is_one_line_naming_the_key_and_the_value(tmp_path, endpoint, source, message):
    path = deliveries_file(tmp_path, endpoint)
    path.write_text(path.read_text().replace('source = "ledger.sqlite"', f"source = {source}"))
    with pytest.raises(DeliveryConfigError, match=message):
        load_deliveries(path)
    code, out, err = run_cli("deliver", str(path), "--once")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert json.dumps(err)  # one readable line

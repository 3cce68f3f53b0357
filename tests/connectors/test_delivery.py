"""The HTTP delivery worker against a real server on 127.0.0.1: retries, order, commits, crashes."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.connectors.delivery import DeliverySpec, DeliveryWorker, load_deliveries
from minikafka.errors import DeliveryConfigError, DeliveryError

from .scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]


class Order(BaseModel):
    user: str
    n: int


def fill(path, n=6, partitions=1):
    with Source(path) as src:
        src.topic("orders", Order, dedup=None, partitions=partitions).extend([{"user": f"u{i % 3}", "n": i} for i in range(n)])


def spec(url, **kw):
    base = dict(name="shipper", topic="orders", endpoint=url, batch_size=2, interval=0.01, timeout=2.0,
                max_backoff=0.05)
    return DeliverySpec(**{**base, **kw})


def delivered(server):
    """(partition, [offsets]) of every request answered 2xx, in arrival order."""
    return [(r.body["partition"], [m["offset"] for m in r.body["messages"]])
            for r in server.requests if r.step != "hang" and isinstance(r.step, int) and r.step < 300]


def committed(path, group="shipper", partitions=1):
    with Source(path) as src:
        g = src.group(group)
        return [g.committed("orders", p) for p in range(partitions)]


def test_500_twice_then_a_timeout_then_200_delivers_everything_in_order_committed_once(db_path):
    fill(db_path, 6)
    with ScriptedServer([500, 500, "hang", 200], hang_seconds=3) as server:
        summary = DeliveryWorker(db_path, [spec(server.url, timeout=0.3)], once=True, rng=random.Random(1)).run()
    keys = [r.headers["Idempotency-Key"] for r in server.requests]
    assert keys[:4] == ["shipper/orders/0/1-2"] * 4  # the same batch, the same key, until it got through
    assert delivered(server) == [(0, [1, 2]), (0, [3, 4]), (0, [5, 6])]
    assert summary.delivered == 6 and summary.partitions[0].failed_attempts == 3 and not summary.errors
    assert committed(db_path) == [6]
    body = server.requests[-1].body
    assert body["topic"] == "orders" and body["messages"][0]["data"] == {"user": "u1", "n": 4}
    assert body["messages"][0]["created"].endswith("Z")
    with Source(db_path) as src:
        run = src.runs()[0]
        assert run["kind"] == "delivery" and run["status"] == "succeeded" and run["rows_out"] == 6
        assert run["rows_failed"] == 3 and run["details"]["by_partition"]["0"]["committed"] == 6


def test_partitions_are_delivered_in_parallel_each_in_offset_order(db_path):
    fill(db_path, 30, partitions=3)
    with ScriptedServer([200]) as server:
        summary = DeliveryWorker(db_path, [spec(server.url, batch_size=4)], once=True).run()
    per_partition: dict[int, list[int]] = {}
    for p, offsets in delivered(server):
        per_partition.setdefault(p, []).extend(offsets)
    assert sorted(per_partition) == [0, 1, 2]
    assert all(offsets == sorted(offsets) for offsets in per_partition.values())
    assert sum(len(o) for o in per_partition.values()) == 30 == summary.delivered
    assert committed(db_path, partitions=3) == [max(o) for _p, o in sorted(per_partition.items())]


def test_a_second_run_delivers_only_new_rows(db_path):
    fill(db_path, 4)
    with ScriptedServer([200]) as server:
        DeliveryWorker(db_path, [spec(server.url)], once=True).run()
        with Source(db_path) as src:
            src.topic("orders", Order, dedup=None).append({"user": "x", "n": 99})
        DeliveryWorker(db_path, [spec(server.url)], once=True).run()
    assert delivered(server) == [(0, [1, 2]), (0, [3, 4]), (0, [5])]


def test_after_max_attempts_the_batch_is_quarantined_with_the_last_status_and_delivery_moves_on(db_path):
    fill(db_path, 4)
    with ScriptedServer([503, 503, 200]) as server:
        summary = DeliveryWorker(db_path, [spec(server.url, max_attempts=2)], once=True).run()
    assert summary.quarantined == 2 and summary.delivered == 2 and committed(db_path) == [4]
    assert delivered(server) == [(0, [3, 4])]
    with Source(db_path) as src:
        rows = src.quarantined("orders")
        assert sorted(r["row_id"] for r in rows) == [1, 2] and rows[0]["origin"] == "delivery"
        assert "HTTP 503: server error 503: try later" in rows[0]["reason"] and rows[0]["attempts"] == 2
        assert src.runs()[0]["status"] == "partial"


def test_an_unreachable_endpoint_with_once_reports_it_and_moves_no_commit(db_path):
    fill(db_path, 2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    summary = DeliveryWorker(db_path, [spec(f"http://127.0.0.1:{port}/x")], once=True).run()
    assert summary.delivered == 0 and committed(db_path) == [0]
    assert "127.0.0.1" in summary.errors[0] and "ConnectError" in summary.errors[0]
    with Source(db_path) as src:
        assert src.runs()[0]["status"] == "failed"


def test_an_unknown_topic_or_partition_stops_before_anything_is_sent(db_path):
    fill(db_path, 2)
    with pytest.raises(DeliveryError, match="'shipper'.*'nope'"):
        DeliveryWorker(db_path, [spec("http://127.0.0.1:9/x", topic="nope")], once=True).run()
    with pytest.raises(DeliveryError, match="partitions 0..0; got partition 3"):
        DeliveryWorker(db_path, [spec("http://127.0.0.1:9/x", partitions=[3])], once=True).run()


def test_headers_take_environment_variables_and_secrets_are_never_shown(db_path):
    fill(db_path, 2)
    d = spec("http://127.0.0.1:9/x", headers={"Authorization": "Bearer ${SHIP_TOKEN}"})
    assert "s3cr3t" not in repr(d)
    with ScriptedServer([200]) as server:
        d.endpoint = server.url
        summary = DeliveryWorker(db_path, [d], once=True, environ={"SHIP_TOKEN": "s3cr3t"}).run()
    assert server.requests[0].headers["Authorization"] == "Bearer s3cr3t"
    assert "s3cr3t" not in "\n".join(summary.lines())
    with Source(db_path) as src:
        assert "s3cr3t" not in str(src.runs()[0])
    with pytest.raises(DeliveryConfigError, match=r"\$\{SHIP_TOKEN\}, which is not set"):
        DeliveryWorker(db_path, [d], once=True, environ={}).run()


def write(tmp_path, text):
    path = tmp_path / "deliveries.toml"
    path.write_text(text)
    return path


def test_a_deliveries_file_is_parsed_with_its_defaults(tmp_path):
    path = write(tmp_path, 'source = "ledger.sqlite"\n[[deliveries]]\nname = "g"\ntopic = "orders"\n'
                           'endpoint = "http://example.com/x"\ninterval = "250ms"\ntimeout = "1m"\n'
                           'partitions = [1, 0]\nheaders = { X-Key = "${K}" }\n')
    defn = load_deliveries(path)
    d = defn.deliveries[0]
    assert defn.source == tmp_path / "ledger.sqlite" and d.partitions == [0, 1]
    assert (d.interval, d.timeout, d.batch_size, d.max_attempts) == (0.25, 60.0, 100, 0)


@pytest.mark.parametrize("body, message", [
    ('[[deliveries]]\nname = "g"\ntopic = "t"\nendpoint = "http://x/y"\nbatch = 5\n', r"unknown key\(s\) \['batch'\]"),
    ('[[deliveries]]\nname = "g"\ntopic = "t"\nendpoint = "http://x/y"\ninterval = "5 hours"\n',
     "key 'interval' must be a positive duration"),
    ('[[deliveries]]\nname = "g"\ntopic = "t"\n', "delivery 'g': missing key 'endpoint'"),
    ('[[deliveries]]\nname = "g"\ntopic = "t"\nendpoint = "ftp://x"\n', "key 'endpoint': must be an http"),
    ('[[deliveries]]\nname = "g"\ntopic = "t"\nendpoint = "http://x/y"\nmax_attempts = -1\n', "max_attempts"),
    ('[[deliveries]]\nname = "g"\ntopic = "t"\nendpoint = "http://x/y"\npartitions = []\n', "key 'partitions'"),
    ('name = "x"\n', r"unknown key\(s\) \['name'\]"),
    ('source = "a.sqlite"\n', "no deliveries defined"),
])
def test_a_malformed_deliveries_file_names_the_problem(tmp_path, body, message):
    with pytest.raises(DeliveryConfigError, match=message):
        load_deliveries(write(tmp_path, body))


def test_durations_in_a_deliveries_file_take_the_one_grammar_including_hours(tmp_path):
    body = '[[deliveries]]\nname = "g"\ntopic = "t"\nendpoint = "http://x/y"\n'
    d = load_deliveries(write(tmp_path, body + 'interval = "500ms"\ntimeout = 3\nmax_backoff = "1h"\n')).deliveries[0]
    assert (d.interval, d.timeout, d.max_backoff) == (0.5, 3.0, 3600.0)
    with pytest.raises(DeliveryConfigError, match="positive"):
        load_deliveries(write(tmp_path, body + 'interval = "0s"\n'))


def cli(*args, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "minikafka.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def deliveries_file(tmp_path, url, **extra):
    lines = ['source = "ledger.sqlite"', "[[deliveries]]", 'name = "shipper"', 'topic = "orders"',
             f'endpoint = "{url}"', "batch_size = 2", 'interval = "20ms"', 'max_backoff = "50ms"']
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return write(tmp_path, "\n".join(lines) + "\n")


def test_sigkill_during_a_batch_then_restart_resends_only_that_batch_with_the_same_key(tmp_path):
    db = str(tmp_path / "ledger.sqlite")
    fill(db, 6)
    with ScriptedServer([200, "hang", 200], hang_seconds=20) as server:
        path = deliveries_file(tmp_path, server.url, timeout='"30s"')
        first = cli("deliver", str(path), "--once")
        server.wait_for(2)  # the second batch is in flight: the server holds it
        assert len(server.requests) == 2
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        assert committed(db) == [2]
        again = cli("deliver", str(path), "--once")
        out, err = again.communicate(timeout=60)
        assert again.returncode == 0, err
    keys = [r.headers["Idempotency-Key"] for r in server.requests]
    assert keys == ["shipper/orders/0/1-2", "shipper/orders/0/3-4", "shipper/orders/0/3-4", "shipper/orders/0/5-6"]
    assert committed(db) == [6] and "delivered 4" in out


def test_sigterm_finishes_the_batch_in_flight_commits_and_exits_0(tmp_path):
    db = str(tmp_path / "ledger.sqlite")
    fill(db, 6)
    with ScriptedServer([200, "hang", 200], hang_seconds=1.0) as server:
        path = deliveries_file(tmp_path, server.url, timeout='"10s"')
        worker = cli("deliver", str(path))
        server.wait_for(2)
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert "SIGTERM" in err and committed(db) == [4]  # the held batch answered 200 and was committed
    assert len(server.requests) == 2
    with Source(db) as src:
        run = src.runs()[0]
        assert run["status"] == "succeeded" and run["details"]["stopped_by_signal"] is True


def test_the_cli_reports_a_malformed_file_with_exit_code_2(tmp_path):
    path = write(tmp_path, '[[deliveries]]\nname = "g"\ntopic = "t"\n')
    proc = cli("deliver", str(path))
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "missing key 'endpoint'" in err

"""MQTT source and sink against a real Mosquitto broker started by the test."""

from __future__ import annotations

import json
import threading
import time

import paho.mqtt.client as mqtt
import pytest

from minikafka.connectors import MQTTSink, MQTTSource, TopicSink
from minikafka.errors import ConnectorError
from tests.util.ports import unused_port


def subscriber(url: str, topic: str):
    host, port = url.removeprefix("mqtt://").split(":")
    received: list = []
    ready = threading.Event()
    client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2)
    client.on_connect = lambda c, *a: c.subscribe(topic, qos=1)
    client.on_subscribe = lambda *a: ready.set()
    client.on_message = lambda c, u, m: received.append(json.loads(m.payload))
    client.connect(host, int(port))
    client.loop_start()
    assert ready.wait(10)
    return client, received


def publish(url: str, topic: str, payloads: list[bytes]) -> None:
    host, port = url.removeprefix("mqtt://").split(":")
    client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2)
    client.connect(host, int(port))
    client.loop_start()
    for p in payloads:
        client.publish(topic, p, qos=1).wait_for_publish(10)
    client.disconnect()
    client.loop_stop()


def wait_for(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def test_mqtt_source_to_topic_to_mqtt_sink_through_a_real_broker(file_source, broker):
    listener, received = subscriber(broker, "results")
    stream = file_source.stream("sensors")
    src = MQTTSource(broker, "sensors/#")
    handle = stream.attach(src)
    assert src.ready.wait(10)
    publish(broker, "sensors/kitchen", [json.dumps({"t": t}).encode() for t in range(6)] + [b"not json"])
    wait_for(lambda: src.appended == 6 and src.quarantined == 1)
    sink = MQTTSink(broker, "results")
    file_source.streaming("sensors", lambda w: {"window": w.id, "sum": sum(d["t"] for d in w.data)},
                          consumer="summer", size=3, sink=sink, until_idle=True)
    wait_for(lambda: len(received) == 2)
    assert received == [{"window": 1, "sum": 3}, {"window": 2, "sum": 12}]
    handle.cancel()
    sink.close()
    listener.disconnect()
    assert [q["origin"] for q in file_source.quarantined("sensors")] == ["mqtt:sensors/kitchen"]


def test_mqtt_source_output_can_go_to_a_topic_sink(file_source, broker):
    stream = file_source.stream("in")
    out = file_source.stream("out")
    src = MQTTSource(broker, "in/x", envelope=True)
    handle = stream.attach(src)
    assert src.ready.wait(10)
    publish(broker, "in/x", [b'{"a": 1}', b'{"a": 2}'])
    wait_for(lambda: src.appended == 2)
    handle.cancel()
    assert list(stream.iter_new())[0] == {"topic": "in/x", "payload": {"a": 1}, "qos": 1, "retain": False}
    file_source.streaming("in", lambda w: w.data, consumer="copy", size=2, sink=TopicSink(out), until_idle=True)
    assert [d["payload"]["a"] for d in out.iter_new()] == [1, 2]


def test_an_unreachable_broker_is_a_clear_error_without_follow(file_source):
    url = f"mqtt://127.0.0.1:{unused_port()}"
    with pytest.raises(ConnectorError, match=r"cannot reach MQTT broker 127\.0\.0\.1:\d+"):
        file_source.stream("s").attach(MQTTSource(url, "x", follow=False), background=False)
    with pytest.raises(ConnectorError, match="cannot reach MQTT broker"):
        MQTTSink(url, "x").put({"a": 1})


def test_in_follow_mode_an_unreachable_broker_is_retried_until_it_comes_up(file_source, tmp_path, caplog):
    import subprocess

    from tests.connectors.conftest import MOSQUITTO

    port = unused_port()
    url = f"mqtt://127.0.0.1:{port}"
    stream = file_source.stream("late")
    src = MQTTSource(url, "late", max_backoff=0.5)
    with caplog.at_level("WARNING", logger="minikafka.connectors"):
        handle = stream.attach(src)
        wait_for(lambda: "cannot reach MQTT broker" in caplog.text)
    conf = tmp_path / "m.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert src.ready.wait(15)
        publish(url, "late", [b'{"ok": true}'])
        wait_for(lambda: src.appended == 1)
    finally:
        handle.cancel()
        proc.terminate()
        proc.wait(10)
    assert list(stream.iter_new()) == [{"ok": True}]


def test_a_bad_mqtt_url_is_refused():
    with pytest.raises(ConnectorError, match="MQTT url must look like"):
        MQTTSource("http://x", "t")


class _Child:
    """``tests.connectors.mqtt_child`` in its own process, its stdout lines read as they come."""

    def __init__(self, ledger: str, url: str, *extra: str):
        import os
        import queue
        import subprocess
        import sys
        from pathlib import Path

        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.connectors.mqtt_child", ledger, url, *extra],
                                     cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line.strip()) for line in self.proc.stdout],
                         daemon=True).start()

    def wait_line(self, wanted, timeout: float = 20.0) -> str:
        """The first line equal to ``wanted`` (or for which ``wanted(line)`` is true)."""
        import queue

        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                self.proc.kill()
                raise AssertionError(f"no {wanted!r} from the child in {timeout} s; stderr: "
                                     f"{self.proc.stderr.read()[-2000:]}") from None
            if (wanted(line) if callable(wanted) else line == wanted):
                return line

    def kill9(self) -> None:
        import signal

        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def stored_readings(path: str) -> list[int]:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute('SELECT n FROM "readings" ORDER BY "_id"')]
    finally:
        conn.close()


def test_messages_received_but_not_committed_when_the_process_is_killed_come_again_after_a_restart(db_path, broker):
    import sqlite3

    # 1. the source received messages and is waiting to commit them (the test holds the
    #    ledger's write lock) when it is killed with SIGKILL
    first = _Child(db_path, broker)
    first.wait_line("ready")
    lock = sqlite3.connect(db_path, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        publish(broker, "sensors/a", [json.dumps({"n": n}).encode() for n in range(1, 6)])
        first.wait_line(lambda line: line.startswith("received ") and line != "received 0 appended 0")
        first.kill9()
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert stored_readings(db_path) == []
    # 2. a restart gets them again from the broker's session and commits the first batch;
    #    it is killed right after that commit, before it acknowledged anything
    second = _Child(db_path, broker, "--crash-on-ack")
    assert second.proc.wait(20) == -9, "the restarted source never got the messages again"
    kept = stored_readings(db_path)
    assert kept and kept == list(range(1, len(kept) + 1))
    # 3. the next restart gets all five once more (none was acknowledged) and a new one:
    #    the dedup key drops the repeats, nothing is lost or stored twice
    third = _Child(db_path, broker)
    third.wait_line("ready")
    publish(broker, "sensors/b", [b'{"n": 6}'])
    third.wait_line(f"received 6 appended {6 - len(kept)}")
    third.kill9()
    assert stored_readings(db_path) == [1, 2, 3, 4, 5, 6]


def test_the_mqtt_session_id_is_stable_for_one_ledger_topic_and_filter_and_can_be_overridden(file_source, tmp_path):
    topic = file_source.stream("readings")
    a, b = MQTTSource("mqtt://127.0.0.1:1", "sensors/#"), MQTTSource("mqtt://127.0.0.1:1", "sensors/#")
    assert a.session_id(topic) == b.session_id(topic)
    assert a.session_id(topic) != MQTTSource("mqtt://127.0.0.1:1", "other/#").session_id(topic)
    assert len(a.session_id(topic)) <= 23 and a.clean_session is False and a.qos == 1
    assert MQTTSource("mqtt://127.0.0.1:1", "x", client_id="mine").client_id == "mine"


def test_a_nan_or_infinity_payload_is_quarantined_with_its_mqtt_topic_and_the_source_goes_on(file_source, broker):
    stream = file_source.stream("sensors")
    src = MQTTSource(broker, "sensors/#")
    handle = stream.attach(src)
    assert src.ready.wait(10)
    publish(broker, "sensors/k", [b'{"t": 1}', b'{"t": NaN}', b'{"t": 1e999}', b'{"t": -Infinity}', b'{"t": 5}'])
    wait_for(lambda: src.appended + src.quarantined == 5)
    assert handle.running and handle.error is None
    publish(broker, "sensors/k", [b'{"t": 6}'])
    wait_for(lambda: src.appended == 3)
    handle.cancel()
    assert [d["t"] for d in stream.iter_new()] == [1, 5, 6]
    bad = file_source.quarantined("sensors")
    assert sorted(q["payload"] for q in bad) == ['{"t": -Infinity}', '{"t": 1e999}', '{"t": NaN}']
    assert {q["origin"] for q in bad} == {"mqtt:sensors/k"} and all(q["reason"] for q in bad)


def test_an_mqtt_password_never_appears_in_repr_errors_or_logs(file_source, caplog):
    url = f"mqtt://ann:hunter2secret@127.0.0.1:{unused_port()}"
    src = MQTTSource(url, "x", follow=False)
    assert "hunter2secret" not in repr(src) and "127.0.0.1" in repr(src)
    with caplog.at_level("DEBUG"):
        handle = file_source.stream("s").attach(src)
        handle.join(10)
        assert isinstance(handle.error, ConnectorError)
        assert "hunter2secret" not in str(handle.error)
        with pytest.raises(ConnectorError) as err:
            MQTTSink(url, "x").put({"a": 1})
        assert "hunter2secret" not in str(err.value)
        with pytest.raises(ConnectorError) as err:
            MQTTSource("http://ann:hunter2secret@host/x", "t")
        assert "hunter2secret" not in str(err.value) and "http://host/x" in str(err.value)
    assert "hunter2secret" not in caplog.text and "attached" in caplog.text

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

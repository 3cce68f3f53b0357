"""MQTTSource and MQTTSink (paho-mqtt 2.x; ``pip install 'minikafka-spark[mqtt]'``).

The source subscribes to a topic filter and appends each message's JSON payload to a
topic. It keeps a persistent session (``clean_session=False``) under a stable client id
(derived from the ledger file, the topic and the filter; ``client_id=`` overrides it),
subscribes with QoS 1, and acknowledges each message to the broker only after the
transaction that stored it committed (paho's manual acks). A process killed between
receiving and committing gets the unacknowledged messages again from the broker when it
reconnects under the same id: at-least-once, and a dedup key on the topic drops the
repeats. A payload that is not valid JSON, does not fit the topic, or holds a value the
ledger refuses (NaN, infinity) goes to the quarantine with the MQTT topic it came on,
and the source goes on. The URL's password never appears in ``repr``, logs or errors.
An unreachable broker
is a ``ConnectorError`` naming it; in follow mode the source retries with exponential
backoff (capped), and reconnects the same way after a lost connection.

The sink publishes each message as JSON and waits for the broker's acknowledgement, so
a failed publish fails the window (which is offered again).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlparse

from ..errors import ConnectorError
from ..util.duration import parse_duration
from ..util.optional import require
from ..util.redact import redact_url
from .batches import Incoming, loads_strict, parse_json_message, store_batch
from .intake import validate_payload

log = logging.getLogger("minikafka.connectors")
SCHEMES = {"mqtt": 1883, "tcp": 1883, "mqtts": 8883, "ssl": 8883}


def _parse_url(url: str) -> tuple[str, int, str | None, str | None, bool]:
    if not isinstance(url, str):
        raise ConnectorError(f"MQTT url must be text like mqtt://host[:port], got {type(url).__name__}")
    try:
        parsed = urlparse(url if "://" in url else f"mqtt://{url}")
        port = parsed.port
    except ValueError:
        parsed, port = None, None
    if parsed is None or parsed.scheme not in SCHEMES or not parsed.hostname:
        raise ConnectorError(f"MQTT url must look like mqtt://host[:port] (or mqtts://), got {redact_url(url)!r}")
    return parsed.hostname, port or SCHEMES[parsed.scheme], parsed.username, parsed.password, \
        parsed.scheme in ("mqtts", "ssl")


def _client(client_id: str, clean_session: bool, user, password, tls: bool, manual_ack: bool = False):
    require("paho.mqtt", "mqtt")
    import paho.mqtt.client as mqtt

    client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                         clean_session=clean_session, manual_ack=manual_ack)
    if user:
        client.username_pw_set(user, password)
    if tls:
        client.tls_set()
    return client


class _Node:
    kind = "node"

    def __init__(self, url: str, topic: str, *, qos: int = 1, client_id: str | None = None,
                 clean_session: bool = True, connect_timeout: float = 5.0):
        if qos not in (0, 1, 2):
            raise ConnectorError(f"qos must be 0, 1 or 2, got {qos!r}")
        if not isinstance(topic, str) or not topic:
            raise ConnectorError(f"MQTT topic must be a non-empty string, got {topic!r}")
        if client_id is not None and (not isinstance(client_id, str) or not client_id):
            raise ConnectorError(f"client_id must be a non-empty string, got {client_id!r}")
        self.host, self.port, self._user, self._password, self._tls = _parse_url(url)
        self.url = redact_url(url if "://" in url else f"mqtt://{url}")  # the password stays in _password only
        self.topic = topic
        self.qos = qos
        self.client_id = client_id
        self.clean_session = clean_session
        self.connect_timeout = parse_duration(connect_timeout, what="connect_timeout")

    @property
    def where(self) -> str:
        return f"MQTT broker {self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}, {self.topic!r})"

    def _connect(self, client) -> None:
        try:
            client.connect(self.host, self.port, keepalive=30)
        except (OSError, ValueError) as exc:
            raise ConnectorError(f"cannot reach {self.where}: {exc}") from exc


class MQTTSource(_Node):
    """Subscribe to ``topic`` (a filter such as ``sensors/#``) and append each message.

    Args:
        url: ``mqtt://[user:password@]host[:port]`` (``mqtts://`` for TLS).
        topic: the MQTT topic filter.
        qos: subscription QoS (1: at-least-once with acks after the commit).
        follow: retry an unreachable broker with backoff (False: raise ConnectorError).
        envelope: store ``{"topic", "payload", "qos", "retain"}`` (minibatch's shape) instead
            of the payload itself.
        max_backoff: the longest wait between reconnection attempts, in seconds.
        batch, flush_interval: messages are stored in transactions of up to ``batch``
            messages, at least every ``flush_interval`` seconds.
        client_id: the MQTT client id of the persistent session (default: derived from the
            ledger file, the topic and the filter, the same at every restart). Two sources
            must not share one: the broker disconnects the older.
        clean_session: True drops the session at every disconnect (messages not yet
            committed when the process dies are then lost); default False.

    Attributes:
        ready: an Event set once subscribed. received, appended, quarantined: counts.
    """

    kind = "source"

    def __init__(self, url: str, topic: str, *, qos: int = 1, follow: bool = True, envelope: bool = False,
                 max_backoff: float = 30.0, batch: int = 500, flush_interval: float = 0.05,
                 clean_session: bool = False, **kwargs: Any):
        super().__init__(url, topic, qos=qos, clean_session=clean_session, **kwargs)
        self.follow = follow
        self.envelope = envelope
        self.max_backoff = parse_duration(max_backoff, what="max_backoff")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConnectorError(f"batch must be a positive integer, got {batch!r}")
        self.batch = batch
        self.flush_interval = parse_duration(flush_interval, what="flush_interval")
        self.ready = threading.Event()
        self.received = self.appended = self.quarantined = 0
        self._cancel = threading.Event()
        self._buffer: list = []

    def cancel(self) -> None:
        self._cancel.set()

    def stream(self, topic: Any) -> None:
        """Append messages to ``topic`` until ``cancel()``.

        Raises:
            ConnectorError: the broker cannot be reached and ``follow`` is False.
        """
        client_id = self.client_id or self.session_id(topic)
        client = _client(client_id, self.clean_session, self._user, self._password, self._tls,
                         manual_ack=self.qos > 0)
        client.on_connect = self._on_connect
        client.on_subscribe = lambda *a, **k: self.ready.set()
        client.on_message = self._on_message
        client.on_disconnect = lambda *a, **k: self.ready.clear()
        self._reach(client, first=True)
        try:
            while not self._cancel.is_set():
                rc = client.loop(timeout=self.flush_interval)
                if self._buffer:
                    self._flush(topic, client)
                if rc != 0 and not self._cancel.is_set():
                    log.warning("lost %s (code %s): reconnecting", self.where, rc)
                    self._reach(client, first=False)
        finally:
            try:
                if self._buffer:
                    self._flush(topic, client)
            finally:
                client.disconnect()

    def session_id(self, topic: Any) -> str:
        """The client id of this source's persistent session: stable for one ledger file,
        topic and filter (``minikafka-`` and 12 hex digits, within MQTT 3.1's 23 bytes)."""
        from pathlib import Path

        path = topic.source.path
        where = path if path == ":memory:" else str(Path(path).resolve())
        digest = hashlib.sha256(f"{where}\0{topic.name}\0{self.topic}".encode()).hexdigest()
        return f"minikafka-{digest[:12]}"

    def _reach(self, client, *, first: bool) -> None:
        delay = 0.5
        while not self._cancel.is_set():
            try:
                if first:
                    self._connect(client)
                else:
                    client.reconnect()
                return
            except (ConnectorError, OSError) as exc:
                error = exc if isinstance(exc, ConnectorError) else ConnectorError(f"cannot reach {self.where}: {exc}")
                if not self.follow:
                    raise error from exc
                log.warning("%s; retrying in %.1f s", error, delay)
                self._cancel.wait(delay)
                delay = min(self.max_backoff, delay * 2)

    def _on_connect(self, client, userdata, flags, reason_code, properties=None) -> None:
        if reason_code.is_failure:
            log.error("%s refused the connection: %s", self.where, reason_code)
            return
        client.subscribe(self.topic, qos=self.qos)

    def _on_message(self, client, userdata, message) -> None:
        self.received += 1
        self._buffer.append(message)

    def _flush(self, topic: Any, client) -> None:
        messages, self._buffer = self._buffer, []
        incoming = []
        for m in messages:
            if self.envelope:
                try:
                    payload = loads_strict(m.payload)
                except ValueError:
                    payload = m.payload.decode("utf-8", "replace")
                model, reason = validate_payload(
                    topic, {"topic": m.topic, "payload": payload, "qos": m.qos, "retain": bool(m.retain)})
            else:
                model, reason = parse_json_message(topic, m.payload)
            incoming.append(Incoming(model, m.payload.decode("utf-8", "replace"), reason, f"mqtt:{m.topic}"))
        appended, quarantined = store_batch(topic, incoming)
        self.appended += appended
        self.quarantined += quarantined
        if self.qos > 0:
            for m in messages:  # acknowledged only now: a crash before this re-delivers
                client.ack(m.mid, m.qos)


class MQTTSink(_Node):
    """Publish each message as JSON to ``topic``; ``put`` returns once the broker has it.

    Raises (from ``put``):
        ConnectorError: the broker cannot be reached or did not acknowledge in ``timeout``.
    """

    kind = "sink"

    def __init__(self, url: str, topic: str, *, qos: int = 1, timeout: float = 10.0, retain: bool = False,
                 **kwargs: Any):
        super().__init__(url, topic, qos=qos, **kwargs)
        self.client_id = self.client_id or f"minikafka-sink-{uuid.uuid4().hex[:12]}"
        self.timeout = parse_duration(timeout, what="timeout")
        self.retain = retain
        self._client = None
        self._lock = threading.Lock()

    def _ensure(self):
        if self._client is None:
            client = _client(self.client_id, self.clean_session, self._user, self._password, self._tls)
            self._connect(client)
            client.loop_start()
            self._client = client
        return self._client

    def put(self, message: Any) -> None:
        body = json.dumps(message.model_dump(mode="json") if hasattr(message, "model_dump") else message,
                          default=str)
        with self._lock:
            client = self._ensure()
            info = client.publish(self.topic, body, qos=self.qos, retain=self.retain)
            deadline = time.monotonic() + self.timeout
            while not info.is_published():
                if time.monotonic() > deadline or info.rc != 0:
                    self.close()
                    raise ConnectorError(f"{self.where} did not acknowledge a message on {self.topic!r} "
                                         f"within {self.timeout} s (rc={info.rc})")
                time.sleep(0.002)

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            client.disconnect()
            client.loop_stop()

    cancel = close

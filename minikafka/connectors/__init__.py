"""The outside world on top of the Python API: HTTP delivery, MQTT, followed files (sources and sinks).

Sources have ``stream(topic)`` and ``cancel()`` (attach them with ``topic.attach(source)``);
sinks have ``put(message)`` (give them to ``source.streaming(..., sink=)``).
"""

from .files import JSONLSource
from .mqtt import MQTTSink, MQTTSource
from .sinks import HTTPSink, TopicSink

__all__ = ["HTTPSink", "JSONLSource", "MQTTSink", "MQTTSource", "TopicSink"]

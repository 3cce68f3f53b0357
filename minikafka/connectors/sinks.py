"""TopicSink: a streaming function's output written into a topic, exactly once.

Given as ``sink=`` to ``source.streaming(...)``, its rows are written in the same SQLite
transaction that commits the window (and acks its input rows). Outside a streaming
consumer, ``put(message)`` appends one message.
"""

from __future__ import annotations

from typing import Any


class TopicSink:
    """Write outputs to ``topic`` (a Topic or Stream, or a topic name on the same ledger)."""

    def __init__(self, topic: Any):
        self.topic = topic

    def __repr__(self) -> str:
        return f"TopicSink({getattr(self.topic, 'name', self.topic)!r})"

    # marks the sink as transactional: streaming() writes it inside the window's commit
    write_in_current_transaction = True

    def put(self, message: Any) -> None:
        if isinstance(self.topic, str):
            raise TypeError("TopicSink(name).put() needs a Topic object; streaming() resolves names itself")
        self.topic.append(message)

"""Sources attached to a topic: objects with ``stream(topic)`` and ``cancel()``.

``topic.attach(source)`` runs ``source.stream(topic)`` in a background thread. A Source
(the ledger) belongs to the thread that opened it, so the thread opens its own on the
same file and hands the source that thread's view of the topic.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from ...errors import StreamingConfigError

if TYPE_CHECKING:
    from ..core.handles import SourceHandle, SourceOpener, TopicHandle

log = logging.getLogger("minikafka.streams")


def reopen(topic: TopicHandle, source: SourceHandle) -> TopicHandle:
    """The same topic (or stream) on another Source of the same file."""
    if topic.rows.is_stream:
        return source.stream(topic.name)
    return source.topic(topic.name, topic.model, dedup=topic.dedup or None)


class Attachment:
    """A source running in the background for one topic; ``cancel()`` stops it.

    Attributes:
        error: the exception that ended the source, or None.
    """

    def __init__(self, topic: TopicHandle, connector: Any):
        if not (callable(getattr(connector, "stream", None)) and callable(getattr(connector, "cancel", None))):
            raise StreamingConfigError(
                f"attach() takes an object with stream(stream) and cancel() methods, got {connector!r}")
        if topic.source.path == ":memory:":
            raise StreamingConfigError(
                "attach() runs the source in a background thread, which cannot share a ':memory:' ledger: "
                "use a file Source (or attach(source, background=False))")
        self.topic_name = topic.name
        self.connector = connector
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(topic, type(topic.source), topic.source.path),
                                        name=f"minikafka-source-{topic.name}", daemon=True)
        self._thread.start()

    def _main(self, topic: TopicHandle, source_cls: SourceOpener, path: str) -> None:
        try:
            with source_cls(path) as source:
                self.connector.stream(reopen(topic, source))
        except BaseException as exc:  # reported on the handle; a thread has no caller to raise to
            self.error = exc
            log.error("source %r attached to %r stopped: %s", self.connector, self.topic_name, exc)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def cancel(self, timeout: float | None = 10.0) -> None:
        """Stop the source and wait for its thread."""
        self.connector.cancel()
        self._thread.join(timeout)

    stop = cancel

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)


def attach(topic: TopicHandle, connector: Any, *, background: bool = True) -> Attachment | None:
    """Feed ``topic`` from ``connector``; in the background (a handle) or here (blocking)."""
    if not background:
        if not callable(getattr(connector, "stream", None)):
            raise StreamingConfigError(f"attach() takes an object with stream(stream) and cancel(), got {connector!r}")
        connector.stream(topic)
        return None
    handle = Attachment(topic, connector)
    topic.__dict__.setdefault("_attachments", []).append(handle)
    return handle

"""Streams (the face): ``Stream``, a schemaless topic of JSON objects (``source.stream(name)``),
and ``streaming()``, which starts the windowed runner of ``api.modes.streaming`` (minibatch's
model on the ledger; its module docstring states the window and crash contract).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..errors import StreamingConfigError
from ..ledger.topics import catalog, validate_consumer_name
from ..util import clock
from ..util.procs import concurrency_limit
from .core.rows import StreamRows
from .core.transaction import Transaction
from .modes.streaming import StreamingConsumer, consumer_name
from .modes.windows import Window, WindowEmitter, check_emitter_arguments, make_emitter
from .topic import Topic

if TYPE_CHECKING:
    from .core.handles import SourceHandle, TopicHandle

log = logging.getLogger("minikafka.streams")


class JsonObject(BaseModel):
    """One message of a schemaless stream: any JSON object, stored as JSON text."""

    data: dict[str, Any]


STREAM_MODEL = f"{JsonObject.__module__}:{JsonObject.__qualname__}"


class Stream(Topic):
    """A schemaless topic of JSON objects (minibatch's ``Stream``); a Topic in every other way.

    ``append(dict)`` stores the object; reading yields the dicts back.
    """

    is_stream = True
    rows_class = StreamRows

    def __repr__(self) -> str:
        return f"Stream({self.name!r})"

    def append(self, payload: dict[str, Any], *, on_duplicate: str = "raise",
               tx: Transaction | None = None) -> dict[str, Any] | None:
        """Append one JSON object; returns it.

        Args:
            payload: a dict of plain JSON values.
            on_duplicate: "raise" or "ignore" (as ``Topic.append``).
            tx: join the caller's transaction (``source.transaction()``), exactly as a typed
                topic's ``append(..., tx=)``: the event commits with the business write, or
                not at all.

        Raises:
            InvalidRecordError: not a dict, or a value JSON cannot hold faithfully (NaN,
                infinity, datetime, Decimal, set, bytes, a non-str key, an object...), naming
                its path (``$.a.b``); nothing is stored. Notifications refuse the same values.

        Emits:
            message_appended, after the commit.
        """
        stored_model = super().append(payload, on_duplicate=on_duplicate, tx=tx)  # rows.validate checks it
        return None if stored_model is None else stored_model.data

    def extend(self, rows, *, on_duplicate: str = "raise", status: str = "new",
               tx: Transaction | None = None) -> int:
        """Append many JSON objects in one transaction (all or nothing); returns how many.

        ``tx=`` joins the caller's transaction, as ``append``; a refused value (see ``append``)
        stores nothing.
        """
        return super().extend([self.rows.validate(r) for r in rows], on_duplicate=on_duplicate, status=status,
                              tx=tx)

    def stop(self) -> None:
        """Cancel every source attached to this stream from this object."""
        for handle in self.__dict__.get("_attachments", []):
            handle.cancel()


def open_stream(source: SourceHandle, name: str, *, max_age: Any = None) -> Stream:
    """``source.stream(name, max_age=max_age)``: create or reopen the stream ``name``."""
    return source.stream(name, max_age=max_age)


def topic_for(source: SourceHandle, name: str) -> TopicHandle:
    """The topic ``name`` as this Source has it open, else reopened (typed) or created (stream)."""
    topic = source.opened(name)
    if topic is not None:
        return topic
    row = catalog.catalog_row(source.ledger.conn, name)
    if row is None or catalog.stored_model_path(source.ledger.conn, name) == STREAM_MODEL:
        return source.stream(name)
    source.model_of(name)  # imports the model the catalog names and opens the topic
    topic = source.opened(name)
    assert topic is not None
    return topic


def streaming(source: SourceHandle, name: str, fn: Callable | None = None, *, size: int | None = None,
              interval: float | None = None, relaxed: bool = True, emitter: Any = None,
              consumer: str | None = None, workers: int = 1, sink: Any = None, keep: bool = True,
              until_idle: bool = False, blocking: bool = True, emit_empty: bool = False,
              max_attempts: int | None = None, retry_delay: float = 1.0, poll: float = 0.2,
              forward_on_none: bool = False, **options: Any):
    """Deliver windows of topic/stream ``name`` to a function; see ``Source.streaming``.

    Every argument (the function's name included) is checked before anything is opened
    or created: a bad call leaves the ledger as it was. A ``name`` that is neither a
    topic nor a stream is created as an empty stream, as minibatch's ``streaming`` does
    (a consumer may start before its producer); that is logged and the returned loop's
    ``created_stream`` is True.
    """
    limit = concurrency_limit()
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= limit:
        raise StreamingConfigError(
            f"workers must be an integer from 1 to {limit} (4 processes per CPU, never below 32 nor above 256), "
            f"got {workers!r}")
    if sink is not None and not (isinstance(sink, Topic) or hasattr(sink, "write_in_current_transaction")
                                 or callable(getattr(sink, "put", None)) or callable(getattr(sink, "put_many", None))):
        raise StreamingConfigError(f"sink= takes a Topic or an object with put(message), got {sink!r}")
    if max_attempts is not None and (isinstance(max_attempts, bool) or not isinstance(max_attempts, int)
                                     or max_attempts < 1):
        raise StreamingConfigError(f"max_attempts must be a positive integer, got {max_attempts!r}")
    if isinstance(retry_delay, bool) or not isinstance(retry_delay, (int, float)) or not 0 <= retry_delay < float("inf"):
        raise StreamingConfigError(f"retry_delay must be a number of seconds >= 0, got {retry_delay!r}")
    if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not 0 < poll < float("inf"):
        raise StreamingConfigError(f"poll must be a positive number of seconds, got {poll!r}")
    for flag, value in (("forward_on_none", forward_on_none), ("emit_empty", emit_empty), ("relaxed", relaxed),
                        ("until_idle", until_idle), ("blocking", blocking)):
        if not isinstance(value, bool):
            raise StreamingConfigError(f"{flag} must be True or False, got {value!r}")
    if consumer is not None:
        validate_consumer_name(consumer)
    check_emitter_arguments(size=size, interval=interval, emitter=emitter, options=options)
    del keep  # rows always stay in the ledger as handled; only a retention deletes them

    def start(func: Callable) -> StreamingConsumer:
        name_ = consumer_name(func, consumer)
        created = source.opened(name) is None and catalog.catalog_row(source.ledger.conn, name) is None
        topic = topic_for(source, name)
        if created:
            log.info("streaming(%r): no topic or stream of that name, created an empty stream for consumer %r",
                     name, name_)
        probe = make_emitter(topic, name_, size=size, interval=interval, relaxed=relaxed, emitter=emitter,
                             emit_empty=emit_empty, options=options)
        probe.consumer = name_
        loop = StreamingConsumer(topic, func, probe, consumer=name_, workers=workers, sink=sink,
                                 until_idle=until_idle, max_attempts=max_attempts, retry_delay=retry_delay,
                                 poll=poll, open_topic=topic_for, forward_on_none=forward_on_none)
        loop.created_stream = created
        if blocking:
            return loop.run()
        return loop.start()

    return start if fn is None else start(fn)  # start() checks the function's name before opening anything


__all__ = ["JsonObject", "Stream", "StreamingConsumer", "Window", "WindowEmitter", "clock", "open_stream",
           "streaming"]

"""Events fired to a Source's ``on_event`` observer, only after the commit they report."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("minikafka")

EVENT_NAMES = (
    "topic_created",
    "message_appended",
    "message_handled",
    "pipeline_start",
    "pipeline_end",
)


@dataclass(frozen=True)
class Event:
    """One state transition.

    Attributes:
        name: one of topic_created, message_appended, message_handled,
            pipeline_start, pipeline_end.
        topic: the topic concerned (the source topic for pipeline events).
        record_id: the row id for message events, else None.
        details: extra facts (consumer, target, counts, run_id).
    """

    name: str
    topic: str | None = None
    record_id: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


Observer = Callable[[Event], Any]


def notify(observer: Observer | None, events: list[Event]) -> None:
    """Deliver events in order; an observer exception is logged and swallowed."""
    if observer is None:
        return
    for event in events:
        try:
            observer(event)
        except Exception:  # observability must never break the pipeline
            log.debug("on_event observer raised on %s", event.name, exc_info=True)

"""Events fired to a Source's ``on_event`` observer, only after the commit they report.

Internally every event is an ``Event`` object (``ledger.emit(Event(name, topic, id, details))``).
Delivery converts it to the observer's calling convention:

- minikafka's (the default): ``on_event(event_name, **kwargs)`` with minikafka's keyword
  names (``topic_created(name, model, dedup)``, ``message_appended(topic, payload)``,
  ``message_handled(topic, id)``, ``pipeline_start(source, target)``,
  ``pipeline_end(source, target, count, dry_run)``), nothing more: the extra facts
  (run_id, consumer, counts) travel on the Event object.
- the Event object, for an observer that opts in: one that takes a single positional
  parameter annotated ``Event``, or one that takes one argument and no keyword arguments
  (such as ``list.append``), which could not be called minikafka's way at all.
"""

from __future__ import annotations

import inspect
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
        details: extra facts (consumer, target, counts, run_id, payload).
    """

    name: str
    topic: str | None = None
    record_id: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of minikafka's call for this event.

        Exactly minikafka's names for its five events (so an observer with a fixed
        signature such as ``def log(event, topic=None, payload=None)`` keeps working);
        the extra facts (run_id, consumer, counts) are on the Event object. An event
        minikafka does not have gets ``topic``, ``id`` (when known) and its details.
        """
        d = self.details
        if self.name == "topic_created":
            return {"name": self.topic, "model": d.get("model"), "dedup": tuple(d.get("dedup", ()))}
        if self.name == "message_appended":
            return {"topic": self.topic, "payload": d.get("payload")}
        if self.name == "message_handled":
            return {"topic": self.topic, "id": self.record_id}
        if self.name == "pipeline_start":
            return {"source": self.topic, "target": d.get("target")}
        if self.name == "pipeline_end":
            return {"source": self.topic, "target": d.get("target"),
                    "count": d.get("count", d.get("rows_out", 0)), "dry_run": bool(d.get("dry_run", False))}
        head: dict[str, Any] = {"topic": self.topic}
        if self.record_id is not None:
            head["id"] = self.record_id
        return {**d, **head}


Observer = Callable[..., Any]


def wants_event_object(observer: Observer) -> bool:
    """True when ``observer`` opted in to receive the Event object (see the module doc)."""
    try:
        sig = inspect.signature(observer)
    except (TypeError, ValueError):
        return False
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) > 1 or not positional:
        return False
    first = positional[0]
    note = first.annotation
    if note is Event or (isinstance(note, str) and note.split(".")[-1] == "Event"):
        return True
    # one argument and no keyword arguments: minikafka's call would always fail on it
    return len(positional) == 1 and not any(p.kind is p.VAR_POSITIONAL for p in params)


def deliverer(observer: Observer | None) -> Callable[[Event], Any] | None:
    """A function that hands one Event to ``observer`` in the convention it expects."""
    if observer is None:
        return None
    if wants_event_object(observer):
        return observer

    clash = _first_parameter(observer)

    def call(event: Event) -> Any:
        kwargs = event.kwargs()
        if clash in kwargs:
            # ``lambda name, **kw`` cannot also take topic_created's ``name=`` keyword;
            # minikafka's call fails there and the event is lost, ours drops the keyword
            del kwargs[clash]
        return observer(event.name, **kwargs)

    return call


def _first_parameter(observer: Observer) -> str | None:
    """The name the event name binds to, when a keyword of that name would clash with it."""
    try:
        params = list(inspect.signature(observer).parameters.values())
    except (TypeError, ValueError):
        return None
    if params and params[0].kind is params[0].POSITIONAL_OR_KEYWORD:
        return params[0].name
    return None


def notify(observer: Observer | None, events: list[Event], *, deliver: Callable[[Event], Any] | None = None) -> None:
    """Deliver events in order; an observer exception is logged and swallowed."""
    if observer is None:
        return
    deliver = deliver or deliverer(observer)
    for event in events:
        try:
            deliver(event)
        except Exception:  # observability must never break the pipeline
            log.debug("on_event observer raised on %s", event.name, exc_info=True)

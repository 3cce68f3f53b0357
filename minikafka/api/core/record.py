"""Record: one stored message with its metadata."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel


class RecordOwner(Protocol):
    """Where a Record came from (its topic's ``TopicRows``): what ``ack`` and ``dedup_hash`` need."""

    @property
    def dedup(self) -> tuple[str, ...]: ...

    def set_handled(self, _id: int | None = None, *, record: Record | None = None,
                    consumer: str | None = None) -> None: ...


ModelT = TypeVar("ModelT", bound=BaseModel)


def _stable_hash(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(eq=False)
class Record(Generic[ModelT]):
    """A message as stored: its offset ``id``, times, status, lineage and ``data``.

    ``status`` is the status the record was read with, as seen by its consumer
    (``consumer`` is None for the topic-wide view). ``partition`` is the topic partition
    the row lives in and ``offset`` its id (increasing within a partition, never reused).
    """

    id: int
    topic: str
    created_at: datetime
    handled_at: datetime | None
    status: str
    data: ModelT
    parent_id: int | None = None
    parent_topic: str | None = None
    run_id: str | None = None
    consumer: str | None = None
    partition: int = 0
    _topic: RecordOwner | None = field(default=None, repr=False)

    @property
    def offset(self) -> int:
        """The row's offset in its partition: its id."""
        return self.id

    def ack(self) -> None:
        """Mark this record handled (for its consumer); idempotent.

        Raises:
            SourceClosedError, WrongThreadError: the Source cannot be used.

        Emits:
            message_handled, once, when the row is acked.
        """
        if self._topic is None:
            raise RuntimeError("record is detached from its topic")
        self._topic.set_handled(record=self)

    @property
    def payload_hash(self) -> str:
        """SHA-256 of the payload's canonical JSON (minikafka's ``Record.payload_hash``)."""
        return _stable_hash(self.data.model_dump(mode="json"))

    @property
    def dedup_hash(self) -> str | None:
        """SHA-256 of the dedup fields' canonical JSON, or None without dedup (as minikafka)."""
        fields = self._topic.dedup if self._topic is not None else ()
        if not fields:
            return None
        payload = self.data.model_dump(mode="json")
        return _stable_hash({name: payload[name] for name in fields})

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (self.topic, self.id, self.data) == (other.topic, other.id, other.data)

    __hash__ = None  # type: ignore[assignment]

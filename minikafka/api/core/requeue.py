"""Put quarantined rows back: the one quarantine operation that needs the topic's model.

Listing and purging are model-free and live in ``ledger.consuming.quarantine``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import ValidationError

from ...errors import MinikafkaError
from ...ledger.consuming import deliveries, revive_dead_in_current_transaction
from ...ledger.consuming import quarantine as store
from ...ledger.topics import acks
from ...util.clock import utc_now
from ...util.results import Result
from .rows import TopicRows, rows_of

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .handles import SourceHandle, TopicHandle


@dataclass
class RequeueResult(Result):
    """What a requeue did: rows appended to the topic, rows made pending again for their
    consumer, rows already in the topic (dropped from the quarantine), and rows that
    still fail (kept, with the new reason)."""

    appended: int = 0
    replayed: int = 0
    duplicates: int = 0
    failed: list[tuple[int, str]] = field(default_factory=list)

    @property
    def requeued(self) -> int:
        return self.appended + self.replayed + self.duplicates

    def summary(self) -> str:
        return (f"requeued {self.requeued} row(s): {self.appended} appended, {self.replayed} pending again, "
                f"{self.duplicates} already in the topic; {len(self.failed)} still failing")


def requeue(topic: TopicHandle | TopicRows, ids: list[int] | None = None, *, rerun: bool = False) -> RequeueResult:
    """Requeue quarantined rows of ``topic`` (only ``ids``; default every row), oldest first.

    A row a stage gave up on (origin ``stage``) becomes pending again for that stage's
    consumer; one an HTTP delivery gave up on (``delivery``), for that delivery's group.
    Any other row (a file line, an output that failed an expectation) is validated
    against the topic's model again and appended; with ``rerun``, an output a stage's
    expectation set aside instead makes its input row pending again for that stage, which
    computes it again, checks included (a fact whose lookup row arrived since now joins). A row that still fails stays in the
    quarantine with its attempts counted and the new reason; the others leave it. Everything happens in one transaction.

    Raises:
        MinikafkaError: an id that is not a quarantined row of this topic.
    """
    topic = rows_of(topic)
    result = RequeueResult()
    now = utc_now()
    with topic.ledger.atomic() as conn:
        rows = store.list_quarantined(conn, topic.name, limit=None, ids=ids, oldest_first=True)
        if ids is not None:
            missing = sorted(set(ids) - {r["id"] for r in rows})
            if missing:
                raise MinikafkaError(f"no quarantined row(s) {missing} in topic {topic.name!r}")
        for row in rows:
            reason = _requeue_one(topic, conn, row, now, result, rerun)
            if reason is None:
                store.purge_in_current_transaction(conn, topic.name, ids=[row["id"]])
            else:
                store.note_failed_requeue_in_current_transaction(conn, row["id"], reason)
                result.failed.append((row["id"], reason))
    return result


def requeue_named(source: SourceHandle, topic: str, ids: list[int] | None = None,
                  model: type[BaseModel] | None = None, *, rerun: bool = False) -> RequeueResult:
    """``requeue`` on the topic named ``topic``, opened with ``model`` (default: the model the ledger
    recorded for it): what ``minikafka quarantine TOPIC requeue`` and the web console both call.

    Raises:
        TopicNotFoundError: no such topic. MigrationError: the recorded model cannot be imported.
        MinikafkaError: an id that is not a quarantined row of this topic.
    """
    cls = model or source.model_of(topic)
    return requeue(source.topic(topic, cls, dedup=source.layout(topic).dedup or None), ids, rerun=rerun)


def _requeue_one(topic: TopicRows, conn, row: dict, now: str, result: RequeueResult, rerun: bool) -> str | None:
    if rerun and row["origin"] == "quality" and row["consumer"] and row["row_id"] is not None:
        return _rerun(conn, row, now, result)
    if row["origin"] == "queue" and row["consumer"] and row["row_id"] is not None:
        # a work queue's dead job: pending again for that queue, with fresh attempts
        cid = acks.find_consumer(conn, topic.name, row["consumer"])
        if cid is None:
            return f"queue consumer {row['consumer']!r} is no longer registered on {topic.name!r}"
        if not revive_dead_in_current_transaction(conn, cid, [row["row_id"]], int(time.time() * 1000)):
            return f"row {row['row_id']} is not a dead job of queue consumer {row['consumer']!r}"
        result.replayed += 1
        return None
    if row["origin"] == "delivery":  # an HTTP delivery gave up: pending for its group again
        reason = deliveries.requeue_in_current_transaction(conn, topic.name, row["consumer"], row["row_id"], now)
        result.replayed += reason is None
        return reason
    if row["origin"] == "stage" and row["consumer"] and row["row_id"] is not None:
        cid = acks.find_consumer(conn, topic.name, row["consumer"])
        if cid is None:
            return f"consumer {row['consumer']!r} is no longer registered on {topic.name!r}"
        acks.replay_in_current_transaction(conn, topic.name, cid, row["row_id"], row["row_id"], now)
        result.replayed += 1
        return None
    if rerun:
        return "not an output a stage's expectation set aside: requeue it without --rerun"
    try:
        payload = json.loads(row["payload"] or "")
    except ValueError as exc:
        return f"still malformed JSON: {exc}"
    if not isinstance(payload, dict):
        return f"still not a JSON object: {type(payload).__name__}"
    try:
        model = topic.validate(payload)
    except ValidationError as exc:
        return "still invalid: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    try:
        with topic.ledger.atomic():
            row_id = topic.insert_one_in_current_transaction(model, ignore_duplicates=bool(topic.dedup), now=now)
    except MinikafkaError as exc:
        return f"still cannot be stored: {exc}"
    if row_id is None:
        result.duplicates += 1
    else:
        result.appended += 1
    return None


def _rerun(conn, row: dict, now: str, result: RequeueResult) -> str | None:
    """The input row an output set aside by a stage's expectation came from, pending again for
    that stage's consumer (its one input: the ledger records the parent's id, not its topic)."""
    topics = acks.topics_of_consumer(conn, row["consumer"])
    if len(topics) != 1:
        return (f"stage consumer {row['consumer']!r} reads {len(topics)} topics {topics!r}: which one row "
                f"{row['row_id']} belongs to is not recorded; use 'minikafka replay' on it")
    cid = acks.find_consumer(conn, topics[0], row["consumer"])
    acks.replay_in_current_transaction(conn, topics[0], cid, row["row_id"], row["row_id"], now)
    result.replayed += 1
    return None

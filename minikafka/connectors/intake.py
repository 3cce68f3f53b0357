"""Turning outside messages into topic rows: validate each, quarantine what does not fit."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..api.core.rows import TopicRows, rows_of
from ..api.topic import Topic
from ..errors import InvalidRecordError
from ..ledger.consuming import Quarantined, quarantine_in_current_transaction
from ..util.clock import utc_now


def validate_payload(topic: Topic | TopicRows, payload: Any) -> tuple[Any, str | None]:
    try:
        return rows_of(topic).validate(payload), None
    except ValidationError as exc:
        reason = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return None, f"invalid row: {reason}"
    except (InvalidRecordError, TypeError, ValueError) as exc:
        return None, f"invalid row: {exc}"


def store_in_current_transaction(topic: Topic | TopicRows, valid: list[Any], bad: list[tuple[str, str, str]]) -> int:
    """Append ``valid`` models and quarantine ``bad`` (payload text, reason, origin); returns rows appended."""
    rows = rows_of(topic)
    conn = rows.ledger.conn
    now = utc_now()
    quarantine_in_current_transaction(conn, (Quarantined(rows.name, payload[:10000], reason, origin, now)
                                             for payload, reason, origin in bad))
    if not valid:
        return 0
    return rows.insert_many_in_current_transaction(valid, ignore_duplicates=bool(rows.dedup), now=now)

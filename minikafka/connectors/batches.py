"""Parsing outside messages (file lines, MQTT payloads) and storing a batch in one transaction.

``parse_json_message`` reads a message as strict JSON: ``NaN``, ``Infinity`` and
``-Infinity``, which Python's json module accepts but JSON does not have, make the
message malformed (quarantined with that reason) instead of reaching the ledger.

Validation before the transaction catches most bad messages (malformed JSON, a field of
the wrong type). A few pass it and are refused only when written: NaN or infinity in a
float field or in a stream's JSON (SQLite would store NaN as NULL, JSON has no NaN), an
integer beyond 64 bits. One such message must not stop a source for good (every
restart would stop at the same line, and the valid messages around it would never be
stored). So when the ledger refuses the batch, it is written again message by message,
each in a savepoint: the refused ones go to the quarantine with their origin and the
ledger's reason, the others are stored, and ``also(conn)`` (a followed file's position)
commits in the same transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import LedgerError, MinikafkaError
from .intake import store_in_current_transaction, validate_payload


class _NotJson(ValueError):
    pass


def _refuse_constant(name: str) -> float:
    raise _NotJson(f"{name} is not a JSON value (JSON has no NaN or infinity)")


def parse_json_message(topic: Any, raw: bytes | str) -> tuple[Any, str | None]:
    """(validated model, None) or (None, reason) for one raw message, read as strict JSON."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8: {exc}"
    try:
        payload = json.loads(text, parse_constant=_refuse_constant)
    except _NotJson as exc:
        return None, f"malformed JSON: {exc}"
    except ValueError as exc:
        return None, f"malformed JSON: {exc}"
    return validate_payload(topic, payload)


def loads_strict(raw: bytes | str) -> Any:
    """``json.loads`` refusing NaN and infinity (raises ValueError)."""
    return json.loads(raw, parse_constant=_refuse_constant)


@dataclass
class Incoming:
    """One message: its validated model (None when it did not validate), its text, why
    it did not validate, and where it came from (``file:line``, ``mqtt:topic``)."""

    model: Any
    text: str
    reason: str | None
    origin: str


def _unstorable(exc: BaseException) -> bool:
    """A refusal of this message's values (not a locked or broken ledger)."""
    if isinstance(exc, LedgerError):
        return False
    return isinstance(exc, (MinikafkaError, OverflowError, ValueError, TypeError, sqlite3.IntegrityError))


def store_batch(topic: Any, messages: list[Incoming],
                also: Callable[[sqlite3.Connection], None] | None = None) -> tuple[int, int]:
    """Append the valid messages, quarantine the others, run ``also(conn)``: one transaction.

    Returns:
        (rows appended, messages quarantined).

    Raises:
        LedgerError: the ledger stayed locked (nothing of the batch is stored).
    """
    ledger = topic.source.ledger
    valid = [m.model for m in messages if m.model is not None]
    bad = [(m.text, m.reason or "invalid", m.origin) for m in messages if m.model is None]
    try:
        with ledger.atomic() as conn:
            appended = store_in_current_transaction(topic, valid, bad)
            if also is not None:
                also(conn)
        return appended, len(bad)
    except Exception as exc:
        if not _unstorable(exc):
            raise
    appended, refused = 0, []
    with ledger.atomic() as conn:
        for m in messages:
            if m.model is None:
                continue
            try:
                with ledger.atomic():
                    appended += store_in_current_transaction(topic, [m.model], [])
            except Exception as exc:
                if not _unstorable(exc):
                    raise
                refused.append((m.text, f"cannot be stored: {exc}", m.origin))
        store_in_current_transaction(topic, [], bad + refused)
        if also is not None:
            also(conn)
    return appended, len(bad) + len(refused)

"""Retention: delete rows every consumer has handled once they are older than a topic's max age.

A row still pending for any consumer is never deleted, nor the newest row of a topic
(its id would be handed out again). Settings live in the ledger, so every process that
opens the file applies the same rule.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ...ledger.consuming import retention as stored
from ...ledger.consuming import windows
from ...ledger.topics import catalog
from ...ledger.transactions import Ledger
from ...util import clock
from ...util.clock import format_timestamp, utc_now
from ...util.duration import parse_duration


def max_age_seconds(max_age: Any) -> float | None:
    """``max_age`` in seconds (None stays None).

    Raises:
        ValueError: not a positive duration.
    """
    if max_age is None:
        return None
    return parse_duration(max_age, what="max_age")


def set_retention(ledger: Ledger, topic: str, max_age: Any) -> None:
    """Store (or, with None, remove) the retention of ``topic``."""
    seconds = max_age_seconds(max_age)
    with ledger.atomic() as conn:
        catalog.read_layout(conn, topic)
        stored.set_retention_in_current_transaction(conn, topic, seconds, utc_now())


def retention_of(ledger: Ledger, topic: str) -> float | None:
    return stored.retention_settings(ledger.conn).get(topic)


def apply_retention(ledger: Ledger, topics: list[str] | None = None) -> dict[str, int]:
    """Delete expired handled rows of every topic with a retention (or of ``topics``).

    Returns:
        {topic: rows deleted}. Committed windows older than the max age are forgotten too.
    """
    settings = stored.retention_settings(ledger.conn)
    deleted: dict[str, int] = {}
    for name, seconds in settings.items():
        if topics is not None and name not in topics:
            continue
        cutoff = format_timestamp(clock.now() - timedelta(seconds=seconds))
        with ledger.atomic() as conn:
            layout = catalog.read_layout(conn, name)
            deleted[name] = stored.delete_expired_in_current_transaction(conn, layout, cutoff)
            windows.prune_windows_in_current_transaction(conn, name, cutoff)
    return deleted

"""Notifications: NOTIFY/LISTEN on the ledger (honker's model, with our own code).

``tx.notify(channel, payload)`` inserts a row in the caller's transaction; a listener
started by ``source.listen(channel)`` yields the rows committed after it started (no
history replay, as in Postgres LISTEN), woken by the Source's watcher. A rolled-back
notification never existed. Nothing is pruned unless ``prune_notifications`` is called.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ...errors import InvalidNameError, InvalidRecordError, InvalidSettingError
from ...ledger.consuming import notifications as store
from ...ledger.topics import json_value_refusal
from ...ledger.transactions import Pause, drive, drive_async
from ...util.clock import format_timestamp, parse_timestamp, utc_now
from ...util.timeouts import check_timeout

if TYPE_CHECKING:
    from .handles import SourceHandle

PAGE = 1000


@dataclass(frozen=True)
class Notification:
    """One committed notification: ``id``, ``channel``, ``payload`` (decoded JSON), ``created_at``."""

    id: int
    channel: str
    payload: Any
    created_at: datetime | None


def _check_channel(channel: str) -> str:
    if not isinstance(channel, str) or not channel:
        raise InvalidNameError(f"a notification channel must be a non-empty string, got {channel!r}")
    return channel


def payload_json(channel: str, payload: Any) -> str | None:
    """``payload`` as the JSON text stored (None stays None).

    Raises:
        InvalidRecordError: a value JSON cannot hold faithfully (NaN, infinity, a set, bytes, a
            datetime, a Decimal, a non-str key, an object...: ``columns.json_value_refusal``, the
            rule streams and job results share); the message names the channel and the path.
    """
    if payload is None:
        return None
    problem = json_value_refusal(payload, "payload")
    if problem is not None:
        raise InvalidRecordError(f"notification on channel {channel!r}: the payload cannot be written as JSON: "
                                 f"{problem}")
    return json.dumps(payload, allow_nan=False)


def notify_in_current_transaction(conn: sqlite3.Connection, channel: str, payload: Any) -> int:
    """Insert one notification in the caller's transaction; returns its id.

    Raises:
        InvalidNameError: the channel is not a non-empty string.
        InvalidRecordError: the payload is not JSON (see ``payload_json``); nothing is written.
    """
    _check_channel(channel)
    text = payload_json(channel, payload)
    return store.insert_in_current_transaction(conn, channel, text, utc_now())


class Listener:
    """Iterator of the notifications on one channel committed after it was created.

    Created by ``source.listen(channel, timeout=None)``. Iteration ends when no
    notification arrived for ``timeout`` seconds (never with None).
    """

    def __init__(self, source: SourceHandle, channel: str, timeout: float | None = None):
        self.source = source
        self.channel = _check_channel(channel)
        self.timeout = check_timeout(timeout, "listen timeout")
        self._watcher = source.watcher
        # the watcher mark comes before the max-id read: a commit in between wakes us
        self._mark = self._watcher.mark()
        self.last_id = store.last_id(source.ledger.conn, channel)
        self._buffer: deque[Notification] = deque()

    def __iter__(self) -> Iterator[Notification]:
        return self

    def _fetch(self) -> None:
        rows = store.read_after(self.source.ledger.conn, self.channel, self.last_id, PAGE)
        for row in rows:
            self._buffer.append(Notification(row[0], row[1], None if row[2] is None else json.loads(row[2]),
                                             parse_timestamp(row[3])))
        if rows:
            self.last_id = rows[-1][0]

    def __aiter__(self) -> Listener:
        return self

    async def __anext__(self) -> Notification:
        """``async for n in source.listen(channel)``: waits without blocking the event loop."""
        note = await drive_async(self._watcher, self._next_steps())
        if note is None:
            raise StopAsyncIteration
        return note

    def __next__(self) -> Notification:
        note = drive(self._watcher, self._next_steps())
        if note is None:
            raise StopIteration
        return note

    def _next_steps(self) -> Generator[Pause, None, Notification | None]:
        """The one loop of ``__next__`` and ``__anext__``: the next notification, None after ``timeout``."""
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while not self._buffer:
            self._fetch()
            if self._buffer:
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            yield Pause(self._mark, remaining)
            # re-mark before the next read so nothing slips between read and wait
            self._mark = self._watcher.mark()
        return self._buffer.popleft()


def prune_notifications(conn: sqlite3.Connection, older_than: float | timedelta | None,
                        max_keep: int | None) -> int:
    """Delete notifications older than ``older_than`` OR beyond the newest ``max_keep``; returns the count."""
    cutoff = None
    if older_than is not None:
        seconds = older_than.total_seconds() if isinstance(older_than, timedelta) else float(older_than)
        if seconds < 0:
            raise InvalidSettingError(f"older_than must be >= 0 seconds, got {older_than!r}")
        cutoff = format_timestamp(datetime.now(timezone.utc) - timedelta(seconds=seconds))
    if max_keep is not None and (isinstance(max_keep, bool) or not isinstance(max_keep, int) or max_keep < 0):
        raise InvalidSettingError(f"max_keep must be an integer >= 0, got {max_keep!r}")
    return store.prune_in_current_transaction(conn, cutoff, max_keep)

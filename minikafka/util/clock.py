"""UTC timestamps as the ledger stores them, and the one clock every write reads.

The clock can be replaced (``use_clock(ManualClock(...))``) so that tests of time
windows and triggers move time forward instead of sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone

TIMESTAMP_GLOB = (
    "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]"
    ".[0-9][0-9][0-9][0-9][0-9][0-9]Z"
)
DATE_GLOB = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"

_clock: Callable[[], datetime] | None = None


def format_timestamp(value: datetime) -> str:
    """Render a datetime as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC.

    Naive datetimes are taken to be UTC already (documented in README).
    """
    if value.tzinfo is not None:
        # the UTC wall time: the offset taken off (no arithmetic when it is zero, as parsed
        # timestamps mostly are); astimezone's result, faster
        offset = value.utcoffset()
        if offset:
            value = value - offset
    # the fields formatted at once: half the time of isoformat() (years are 1..9999: 4 digits)
    return _TIMESTAMP % (value.year, value.month, value.day, value.hour, value.minute, value.second,
                         value.microsecond)


_TIMESTAMP = "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ"


def parse_timestamp(text: str | None) -> datetime | None:
    """Inverse of format_timestamp: an aware UTC datetime (None stays None)."""
    if text is None:
        return None
    return datetime.fromisoformat(text)


def now() -> datetime:
    """The current time, aware UTC (the injected clock's when one is in use)."""
    return _clock() if _clock is not None else datetime.now(timezone.utc)


def utc_now() -> str:
    """The current time in the ledger's text form."""
    return format_timestamp(now())


def logical_date(value: date | str | None = None) -> date:
    """A run's logical date (the night it stands for): ``value``, a date or ``YYYY-MM-DD``;
    None: today's date in UTC (the clock's).

    Raises:
        InvalidSettingError: ``value`` is not a date of the form YYYY-MM-DD.
    """
    if value is None:
        return now().date()
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str) and len(value) == 10:  # fromisoformat alone takes 20240331 too
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    from ..errors import InvalidSettingError

    raise InvalidSettingError(f"logical date must be a date YYYY-MM-DD (e.g. 2024-03-31), got {value!r}")


class ManualClock:
    """A clock that only moves when told to (for tests of time windows and triggers).

    Args:
        start: the initial time (default: 2030-01-01T00:00:00Z).
    """

    def __init__(self, start: datetime | None = None):
        self._now = start or datetime(2030, 1, 1, tzinfo=timezone.utc)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move time forward by ``seconds``; returns the new time."""
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when


@contextmanager
def use_clock(clock: Callable[[], datetime]) -> Iterator[Callable[[], datetime]]:
    """Make ``clock`` the time source of every timestamp the ledger writes, for the block."""
    global _clock
    previous, _clock = _clock, clock
    try:
        yield clock
    finally:
        _clock = previous

"""Seconds and instants given to the API, as the integer milliseconds queues and schedules store.

A period (``every``), a lease, a delay or an expiry must be a finite number of seconds that
still fits a 64-bit millisecond column and a date once added to now; an instant (``run_at``,
``expires=datetime``) must be a date Python can represent (years 1 to 9999). Anything else
(NaN, an infinity, ``1e300``, a bool, text) is refused with one line naming the argument,
instead of an ``OverflowError`` or "cannot convert float NaN to integer" from deep inside.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidDurationError, InvalidSettingError

MAX_SECONDS = 100 * 365.25 * 86400  # a century: far beyond any lease or period, far inside a date's range
_FIRST = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
_LAST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()


def duration_ms(value: Any, what: str, *, zero: bool = False, also: str = "") -> int:
    """``value`` seconds as integer milliseconds (at least 1 unless ``zero`` and it is 0).

    ``also``: what else the caller accepts, for the message (" or a datetime").

    Raises:
        InvalidDurationError: (a ValueError) not a number, NaN, an infinity, negative, 0 unless
            ``zero``, or more than a century; the message names ``what`` and the value.
    """
    ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
          and (value >= 0 if zero else value > 0) and value <= MAX_SECONDS)
    if not ok:
        bound = ">= 0" if zero else "> 0"
        raise InvalidDurationError(
            f"{what} must be a finite number of seconds {bound}{also} (at most a century), got {value!r}")
    ms = int(round(value * 1000))
    return ms if zero else max(1, ms)


def instant_ms(value: Any, what: str) -> int:
    """A datetime (naive taken as UTC) or epoch seconds, as integer epoch milliseconds.

    Raises:
        InvalidSettingError: (a ValueError) not a datetime or a finite number of epoch seconds
            between the years 1 and 9999; the message names ``what`` and the value.
    """
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return int(round(aware.timestamp() * 1000))
    ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
          and _FIRST <= value <= _LAST)
    if not ok:
        raise InvalidSettingError(
            f"{what} must be a datetime or finite epoch seconds between the years 1 and 9999, got {value!r}")
    return int(round(value * 1000))

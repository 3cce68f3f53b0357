"""Durations as people write them, one grammar everywhere: 500ms, 10s, 5m, 2h, 7d, 1w.

Pipeline triggers, deliveries files (``interval``, ``timeout``, ``max_backoff``),
retention ages (``prune --runs-older-than``, ``quarantine purge --older-than``) and a
stream's ``max_age`` all read durations through ``parse_duration``, so "1h" works
wherever a duration is taken. A duration is always a finite number of seconds: NaN,
infinity and negative values are refused with the key and the value named (a NaN
interval would make a poll loop spin, an infinite one would never end).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

from ..errors import InvalidDurationError

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")
EXAMPLES = "'500ms', '10s', '5m', '2h', '30d'"


def parse_duration(value: Any, *, what: str = "duration", zero: bool = False) -> float:
    """Seconds from a number, a timedelta, a dict of timedelta arguments or text like "5m".

    Args:
        value: the duration.
        what: the key or option it came from (named in the error).
        zero: accept 0 (default: a duration must be positive).

    Raises:
        InvalidDurationError (a ValueError): anything else, NaN, infinity, a negative
            duration, or zero unless ``zero`` (names ``what`` and the value).
    """
    seconds: float | None = None
    if isinstance(value, bool):
        seconds = None
    elif isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, dict):
        try:
            seconds = timedelta(**value).total_seconds()
        except (TypeError, OverflowError, ValueError):
            seconds = None
    elif isinstance(value, str):
        match = PATTERN.match(value)
        if match:
            seconds = float(match.group(1)) * UNITS[match.group(2)]
    if seconds is None or not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero):
        kind = "a finite duration >= 0" if zero else "a positive duration"
        raise InvalidDurationError(
            f"{what} must be {kind} (seconds, a timedelta, or text like {EXAMPLES}; units ms, s, m, h, d, w), "
            f"got {value!r}")
    return seconds


def parse_timedelta(value: Any, *, what: str = "duration", zero: bool = False) -> timedelta:
    """``parse_duration`` as a ``timedelta`` (for ages: "30d" -> 30 days).

    Raises:
        InvalidDurationError: as ``parse_duration``.
    """
    seconds = parse_duration(value, what=what, zero=zero)
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise InvalidDurationError(f"{what} is too long to be a duration, got {value!r}") from None


def format_duration(seconds: float) -> str:
    """``seconds`` in the grammar ``parse_duration`` reads, in the largest unit that holds it
    exactly: 93600 -> "26h", 3600 -> "1h", 90 -> "90s", 0.5 -> "500ms" (else seconds, rounded)."""
    for unit in ("w", "d", "h", "m", "s", "ms"):
        count = seconds / UNITS[unit]
        if count >= 1 and abs(count - round(count)) < 1e-9:
            return f"{round(count)}{unit}"
    return f"{seconds:g}s"

"""Durations as people write them in pipeline files and arguments: 500ms, 10s, 5m, 2h, 7d."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")


def parse_duration(value: Any, *, what: str = "duration") -> float:
    """Seconds from a number, a timedelta, a dict of timedelta arguments or text like "5m".

    Raises:
        ValueError: anything else, or a duration that is not positive (names ``what``).
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
        except TypeError:
            seconds = None
    elif isinstance(value, str):
        match = PATTERN.match(value)
        if match:
            seconds = float(match.group(1)) * UNITS[match.group(2)]
    if seconds is None or not seconds > 0 or seconds == float("inf"):
        raise ValueError(
            f"{what} must be a positive duration (seconds, a timedelta, or text like '500ms', '10s', '5m', "
            f"'2h', '7d'), got {value!r}")
    return seconds

"""Timeouts and poll intervals given to the API: a finite number of seconds >= 0, or None (never)."""

from __future__ import annotations

import math
from typing import Any

from ..errors import InvalidDurationError


def check_timeout(value: Any, what: str = "timeout", *, none: bool = True, positive: bool = False) -> float | None:
    """``value`` as float seconds; None stays None (when ``none``).

    ``positive``: 0 is refused too (a poll interval of 0 would be a busy loop).

    Raises:
        InvalidDurationError: (an InvalidSettingError, a ValueError) NaN, an infinity, a negative number, a bool or a
            non-number; the message names ``what`` and the value.
    """
    if value is None and none:
        return None
    ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
          and (value > 0 if positive else value >= 0))
    if not ok:
        bound = "> 0" if positive else ">= 0"
        never = " or None (no limit)" if none else ""
        raise InvalidDurationError(f"{what} must be a finite number of seconds {bound}{never}, got {value!r}")
    return float(value)

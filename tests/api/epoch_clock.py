"""A clock of epoch seconds that moves only when a test sets or advances ``now``: the
``clock=`` of queues and schedules in tests."""

from __future__ import annotations


class EpochClock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now

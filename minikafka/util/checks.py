"""The result of one check (health, doctor): a name, a state, the reason and its numbers.

``health`` and ``doctor`` return lists of these; the CLI prints one line per check and a
console can show the same list. States order from best to worst: ok < warn < fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .redact import redact_secrets

OK, WARN, FAIL = "ok", "warn", "fail"
STATES = (OK, WARN, FAIL)


@dataclass(frozen=True)
class CheckResult:
    """One check.

    Attributes:
        name: what was checked, stable across runs (``stage score freshness``).
        state: ``ok``, ``warn`` or ``fail``.
        reason: one human sentence with the numbers (``last success 3.2h ago, limit 26h``);
            masked (``util.redact.redact_secrets``): it may quote an error.
        numbers: the figures behind it (``{"age_s": 11520, "limit_s": 93600}``); None where unknown.
    """

    name: str
    state: str
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", redact_secrets(self.reason))

    def line(self) -> str:
        """``ok    stage score freshness: last success 3.2h ago (limit 26h)``."""
        return f"{self.state:<5} {self.name}: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "reason": self.reason, "numbers": dict(self.numbers)}


def worst(checks: list[CheckResult]) -> str:
    """The worst state among ``checks`` (``ok`` for none)."""
    return max((c.state for c in checks), key=STATES.index, default=OK)


def human_age(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3.2h``, ``4.5d`` (``never`` for None)."""
    if seconds is None:
        return "never"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"

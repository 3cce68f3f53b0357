"""What a run does after a failure, spelled once: ``strict`` or ``best_effort``.

Pipes (``api.modes.pipes``), a stage's rows (``spark.stages.stage``), a pipeline file's
``strategy =`` (``pipelines.schema``) and a pipeline run (``pipelines.options``, ``run
--strategy``) all take these two names.
"""

from __future__ import annotations

from typing import Literal, get_args

Strategy = Literal["strict", "best_effort"]
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
STRICT, BEST_EFFORT = STRATEGIES


def strategy_problem(value: object) -> str | None:
    """None when ``value`` is a strategy; else the one-line complaint naming it."""
    if value in STRATEGIES:
        return None
    return f"strategy must be {' or '.join(repr(s) for s in STRATEGIES)}, got {value!r}"

"""Import great-expectations once, offline and quiet (no analytics, no progress bars)."""

from __future__ import annotations

import os

from ..util.optional import require

_context = None


def import_gx():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("GX_USAGE_STATISTICS_ENABLED", "false")
    return require("great_expectations", "quality")


def context():
    """An ephemeral data context (nothing written to disk), progress bars off."""
    global _context
    if _context is None:
        gx = import_gx()
        from great_expectations.data_context.types.base import ProgressBarsConfig

        ctx = gx.get_context(mode="ephemeral")
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        _context = ctx
    return _context

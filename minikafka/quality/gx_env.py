"""Import great-expectations once, offline and quiet (no analytics, no progress bars).

great-expectations imports scipy (for its distributional expectations) and altair (for the
charts of its rendered docs) when it is imported; a suite that uses neither never needs
them. They are imported lazily instead: their modules are made at import and executed on
first use, so a suite that names such an expectation still gets them, whole. Measured in a
stage host, with pandas, pyarrow and the Connect client imported already: great-expectations
in 1.0 s instead of 1.8 s, on the critical path of every run with a suite.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from contextlib import contextmanager

from ..util.optional import require

DEFERRED = ("scipy", "altair")  # top-level packages great-expectations imports but our suites rarely use

_context = None


class _Deferring(importlib.abc.MetaPathFinder):
    """Finds the Python source modules of ``packages`` as the other finders do, loaded lazily."""

    def __init__(self, packages: tuple[str, ...]):
        self.packages = packages

    def find_spec(self, name, path, target=None):
        if name.split(".", 1)[0] not in self.packages:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is None:
                continue
            # only plain Python source: an extension module cannot be made lazy
            if type(spec.loader) is importlib.machinery.SourceFileLoader:
                spec.loader = importlib.util.LazyLoader(spec.loader)
            return spec
        return None


@contextmanager
def _deferring(packages: tuple[str, ...]):
    """While inside, new imports of ``packages`` are lazy (the modules made stay lazy afterwards)."""
    finder = _Deferring(packages)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def import_gx():
    gx = sys.modules.get("great_expectations")
    if gx is not None:
        return gx
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("GX_USAGE_STATISTICS_ENABLED", "false")
    with _deferring(tuple(p for p in DEFERRED if p not in sys.modules)):
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

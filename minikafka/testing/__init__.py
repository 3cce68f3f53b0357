"""Testing a team's own stages: a temporary ledger, a pipeline file loaded onto it, rows fed into
a stage's inputs and the stage run with its own quality suites on either engine.

The pytest fixtures are in ``minikafka.testing.plugin`` (registered under the ``pytest11`` entry
point, so installing the package is enough); ``StageHarness`` works without pytest as well.
"""

from __future__ import annotations

from .harness import ENGINES, StageHarness, StageResult

__all__ = ["ENGINES", "StageHarness", "StageResult"]

"""Observing a ledger from outside: the Prometheus exposition of what it holds.

Between ``ledger`` and ``api`` in the layers: it reads through ``ledger.consuming.metrics_read`` (one
short read transaction) and formats what it read; it knows nothing of pipelines (callers
pass a pipeline's name and stage names as a ``PipelineScope``).
"""

from __future__ import annotations

"""The ``minikafka`` command: a thin skin over the library (one call per command).

One module per group of commands; each attaches its commands to ``app.main``.
"""

from __future__ import annotations

import sys

from . import (  # noqa: F401  (registers the commands)
    backups,
    consumers,
    data,
    deliver,
    engine,  # noqa: F401  (minikafka serve)
    evolve,
    health,
    lake,
    maintenance,
    metrics,
    nightly,
    pipelines,
    quarantine,
    queues,
    schedules,
    streams,
    topics,
    ui,
    work,
)
from .app import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())

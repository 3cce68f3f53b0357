"""Named points where a test can freeze the process to kill it (crash-safety tests).

``checkpoint(name)`` does nothing unless $MINIKAFKA_FREEZE_AT equals ``name``; then it
prints ``FROZEN <name>`` on stderr and sleeps, so a test can SIGKILL the process at a
known point (before, during or after the commit).
"""

from __future__ import annotations

import os
import sys
import time

ENV = "MINIKAFKA_FREEZE_AT"


def checkpoint(name: str) -> None:
    if os.environ.get(ENV) == name:
        print(f"FROZEN {name}", file=sys.stderr, flush=True)
        time.sleep(3600)

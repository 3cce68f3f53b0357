"""Named points where a test can freeze the process to kill it (crash-safety tests).

``checkpoint(name)`` does nothing unless $MINIKAFKA_FREEZE_AT equals ``name``; then it
prints ``FROZEN <name>`` on stderr and sleeps, so a test can SIGKILL the process at a
known point (before, during or after the commit). With $MINIKAFKA_FREEZE_MODE=stop it
stops itself (SIGSTOP) instead, so a test can SIGCONT it and let it go on.
"""

from __future__ import annotations

import os
import signal
import sys
import time

ENV = "MINIKAFKA_FREEZE_AT"
MODE_ENV = "MINIKAFKA_FREEZE_MODE"  # "sleep" (default) or "stop": SIGSTOP itself, a test resumes it with SIGCONT


def checkpoint(name: str) -> None:
    if os.environ.get(ENV) == name:
        print(f"FROZEN {name}", file=sys.stderr, flush=True)
        if os.environ.get(MODE_ENV) == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
            print(f"RESUMED {name}", file=sys.stderr, flush=True)
            return
        time.sleep(3600)

"""SIGTERM stops a command the way Ctrl-C does, so what it stopped is recorded the same way.

``cron``'s ``timeout``, ``systemctl stop`` and ``kill`` send SIGTERM, which Python's default
ends the process at once: no 'interrupted' row, a stage process left running. Inside
:func:`sigterm_interrupts` SIGTERM raises :class:`Terminated` in the main thread instead: a
``KeyboardInterrupt``, so every clean-up written for Ctrl-C runs, and the text recorded
says which signal it was (``ledger.consuming.runlog.interruption``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived inside :func:`sigterm_interrupts` (a KeyboardInterrupt, so Ctrl-C's
    clean-ups run; exit code 143 at the CLI)."""


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, the first SIGTERM raises :class:`Terminated` in the main thread; later
    ones are ignored, so the clean-up it started is not cut short. Outside the main thread
    (where Python cannot set handlers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []

    def on_sigterm(signum, frame):
        if not received:
            received.append(signum)
            raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

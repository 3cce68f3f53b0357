"""Progress for long steps: a heartbeat line while something runs, so a long stage is never silent."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def heartbeat(echo: Callable[[str], None] | None, label: str, every: float = 15.0) -> Iterator[None]:
    """Call ``echo("<label>: still running (Ns)")`` every ``every`` seconds until the block ends.

    ``echo=None`` or ``every <= 0`` prints nothing. The echo runs on a daemon thread.
    """
    if echo is None or every <= 0:
        yield
        return
    stop = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not stop.wait(every):
            try:
                echo(f"   {label}: still running ({time.monotonic() - t0:.0f}s)")
            except Exception:  # a closed terminal must not kill the stage
                return

    thread = threading.Thread(target=beat, name=f"heartbeat:{label}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1.0)

"""Progress of long steps on standard error.

- On a terminal: one live line drawn by rich (a spinner, the step, a bar when the total
  is known, counts, elapsed time), redrawn in place; lines logged meanwhile scroll above it.
- Elsewhere (cron, systemd, a pipe): a line only when the progress text changed, so an
  idle worker writes nothing; and for steps without counts (``heartbeat``) a "still
  running" line after 15 s, 30 s, 1 min, 2 min, ... (doubling), never a line a second.
- ``quiet``: nothing at all.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any


def is_terminal(stream: IO[str] | None = None) -> bool:
    """``stream`` (default: standard error) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """One step's progress (see the module docstring). A context manager.

    Args:
        label: what is running (``work rss.summarise``, ``export rss.items``).
        total: the known total for a bar (rows to export), else None.
        stream: where to write (default: standard error).
        live: draw a live line (default: when ``stream`` is a terminal).
        quiet: write nothing.
    """

    def __init__(self, label: str, *, total: int | None = None, stream: IO[str] | None = None,
                 live: bool | None = None, quiet: bool = False):
        self.label = label
        self.total = total
        self.stream = stream
        self.quiet = quiet
        self.live = (not quiet) and (is_terminal(stream) if live is None else live)
        self._last: str | None = None
        self._bar: Any = None
        self._task: Any = None

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> Progress:
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            console = Console(file=self.stream or sys.stderr, highlight=False, markup=False)
            columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
            if self.total is not None:
                columns += [BarColumn(), MofNCompleteColumn()]
            columns += [TextColumn("{task.fields[text]}"), TimeElapsedColumn()]
            # standard output stays untouched: it may carry the command's JSON
            self._bar = Bar(*columns, console=console, transient=True, redirect_stdout=False,
                            redirect_stderr=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, text="")
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    # -- reporting ------------------------------------------------------------------------
    def update(self, text: str, *, completed: int | None = None) -> None:
        """The step's current state: redrawn live, or written as a line if it changed."""
        if self.quiet:
            return
        if self._bar is not None:
            fields: dict[str, Any] = {"text": text}
            if completed is not None:
                fields["completed"] = completed
            self._bar.update(self._task, **fields)
            return
        if text != self._last:
            self._last = text
            self._write(f"{self.label}: {text}")

    def log(self, line: str) -> None:
        """A line that stays (above the live line on a terminal)."""
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            self._write(line)

    def _write(self, line: str) -> None:
        stream = self.stream or sys.stderr
        try:
            stream.write(line + "\n")
            stream.flush()
        except (OSError, ValueError):  # a closed terminal must not stop the work
            pass


def backoff_times(first: float) -> Iterator[float]:
    """Seconds since the start at which a step without counts says it is still running:
    ``first``, then doubling (15, 30, 60, 120, ...)."""
    at = first
    while True:
        yield at
        at *= 2


@contextmanager
def heartbeat(echo: Callable[[str], None] | None, label: str, every: float = 15.0) -> Iterator[None]:
    """Call ``echo("<label>: still running (Ns)")`` while the block runs: after ``every``
    seconds, then at doubling intervals (15 s, 30 s, 1 min, 2 min, ...).

    ``echo=None`` or ``every <= 0`` prints nothing. The echo runs on a daemon thread.
    """
    if echo is None or every <= 0:
        yield
        return
    stop = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        for at in backoff_times(every):
            if stop.wait(max(0.0, at - (time.monotonic() - t0))):
                return
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


@contextmanager
def running(label: str, *, echo: Callable[[str], None] | None = None, every: float = 15.0,
            stream: IO[str] | None = None, live: bool | None = None, quiet: bool = False) -> Iterator[None]:
    """A step without counts: a live spinner with the elapsed time on a terminal, else a
    ``heartbeat`` through ``echo``; nothing when ``quiet``."""
    if quiet:
        yield
        return
    if is_terminal(stream) if live is None else live:
        with Progress(label, stream=stream, live=True):
            yield
        return
    with heartbeat(echo, label, every):
        yield

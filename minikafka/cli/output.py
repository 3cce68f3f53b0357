"""What every command shares about its output: --quiet, --debug, progress and notes on stderr.

Standard output carries a command's result (a table, rows, one JSON object with --json);
standard error carries everything else: progress, notes ("no rows", "nothing to do"),
warnings and errors. So ``minikafka show T | jq`` and ``--json`` stay clean.

- ``--quiet`` (``-q``): no progress and no notes on stderr; results, warnings and errors stay.
- ``--debug``: a failing command prints the traceback of its error after the one-line
  ``Error:``, and minikafka's own log lines (DEBUG and up) go to stderr.

Both are accepted before the command (``minikafka --quiet run ...``) and after it
(``minikafka run --quiet ...``).
"""

from __future__ import annotations

import logging
import sys
import traceback

import click

from ..util.progress import Progress, running

QUIET = "minikafka.quiet"
DEBUG = "minikafka.debug"


def _meta() -> dict:
    ctx = click.get_current_context(silent=True)
    return ctx.meta if ctx is not None else {}


def is_quiet() -> bool:
    return bool(_meta().get(QUIET))


def is_debug() -> bool:
    return bool(_meta().get(DEBUG))


def _set_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[QUIET] = True
    return value


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value and not ctx.meta.get(DEBUG):
        ctx.meta[DEBUG] = True
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("minikafka")
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
        ctx.call_on_close(lambda: logger.removeHandler(handler))
    return value


QUIET_HELP = "No progress or notes on stderr (results, warnings and errors still print)."
DEBUG_HELP = "On an error, print its traceback too; show minikafka's log lines on stderr."


def output_options() -> list[click.Option]:
    """--quiet and --debug as options of one command (``MinikafkaGroup`` adds them to every command)."""
    return [
        click.Option(["--quiet", "-q", "quiet_flag"], is_flag=True, expose_value=False, callback=_set_quiet,
                     help=QUIET_HELP),
        click.Option(["--debug", "debug_flag"], is_flag=True, expose_value=False, callback=_set_debug,
                     help=DEBUG_HELP),
    ]


def note(message: str) -> None:
    """An informational line on stderr ("no rows", "nothing to do"); silent with --quiet."""
    if not is_quiet():
        click.echo(message, err=True)


def warn(message: str) -> None:
    """A warning on stderr; printed even with --quiet."""
    click.echo(message, err=True)


def progress(label: str, *, total: int | None = None) -> Progress:
    """A progress reporter on stderr: live on a terminal, a line per change elsewhere, silent with --quiet."""
    return Progress(label, total=total, quiet=is_quiet())


def stage_running(label: str, every: float = 15.0):
    """A step without counts: a live spinner on a terminal, else 'still running' lines at doubling intervals."""
    return running(label, echo=None if is_quiet() else (lambda m: click.echo(m, err=True)), every=every,
                   quiet=is_quiet())


def print_traceback(exc: BaseException) -> None:
    """With --debug: the traceback of ``exc`` (and what caused it) on stderr."""
    if is_debug():
        click.echo("".join(traceback.format_exception(exc)).rstrip(), err=True)

"""The ``minikafka`` click group every command module attaches to."""

from __future__ import annotations

import errno
import os
import sqlite3
import sys

import click

from ..errors import MinikafkaError
from ..util.signals import Terminated
from .output import DEBUG_HELP, QUIET_HELP, _set_debug, _set_quiet, output_options, print_traceback

INTERRUPTED = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C
TERMINATED = 143  # 128 + SIGTERM: a command that records what SIGTERM stopped (util.signals)


def working_directory_on_path() -> None:
    """Make modules in the working directory importable (``schemas.*``, ``jobs.*``), as
    spark-submit stages get them, but after the installed packages: a local file never
    shadows an installed one."""
    cwd = os.getcwd()
    if not any(os.path.abspath(p or os.curdir) == cwd for p in sys.path):
        sys.path.append(cwd)


def stdout_closed() -> bool:
    """Standard output is a pipe (or FIFO) whose reader has gone (``| head -1`` exited)."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, 0)  # POLLERR and POLLHUP are always reported
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no real file descriptor (a test runner's capture)
        return True


def quiet_stdout() -> None:
    """Point standard output at /dev/null, so the flush at interpreter exit cannot fail again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class MinikafkaGroup(click.Group):
    """The command group. A library or SQLite error no command caught is still one ``Error:``
    line (exit 1), never a traceback (``--debug`` adds it); Ctrl-C (SIGINT) ends a command
    with exit code 130 after it recorded what it did (SIGTERM, in the commands that take it
    as an interrupt: 143, ``util.signals``); a reader closing standard output early
    (``minikafka show T | head -1``) ends the command quietly with exit code 0, like other
    Unix tools (click would exit 1). Every command accepts ``--quiet`` and ``--debug``."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        taken = {opt for p in cmd.params for opt in getattr(p, "opts", ())}
        cmd.params.extend(o for o in output_options() if not set(o.opts) & taken)
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except Terminated as exc:
            print_traceback(exc)
            click.echo("stopped (SIGTERM): what was committed stays, the rest is as before", err=True)
            raise click.exceptions.Exit(TERMINATED) from None
        except KeyboardInterrupt as exc:
            print_traceback(exc)
            click.echo("interrupted (Ctrl-C): stopped; what was committed stays, the rest is as before", err=True)
            raise click.exceptions.Exit(INTERRUPTED) from None
        except MinikafkaError as exc:
            print_traceback(exc)
            raise click.ClickException(str(exc)) from exc
        except sqlite3.Error as exc:
            print_traceback(exc)
            raise click.ClickException(f"SQLite: {exc}") from exc
        except click.ClickException as exc:
            if exc.__cause__ is not None:
                print_traceback(exc.__cause__)
            raise
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            if not stdout_closed():  # some other pipe or socket broke: an error like any other
                raise click.ClickException(f"broken pipe: {exc}") from exc
            quiet_stdout()
            raise click.exceptions.Exit(0) from None


@click.group(cls=MinikafkaGroup)
@click.version_option(package_name="minikafka-spark", prog_name="minikafka")
@click.option("--quiet", "-q", "quiet_flag", is_flag=True, expose_value=False, callback=_set_quiet, help=QUIET_HELP)
@click.option("--debug", "debug_flag", is_flag=True, expose_value=False, callback=_set_debug, help=DEBUG_HELP)
def main() -> None:
    """Typed, durable pipelines with one SQLite file as the state ledger.

    Commands that read or write a ledger take --source FILE (or $MINIKAFKA_SOURCE, or
    --pipeline FILE for the pipeline's ledger); --json prints one machine-readable JSON
    value on standard output (its keys are listed in each command's help).

    Standard output carries results; progress, notes and errors go to standard error.
    --quiet and --debug work before or after the command name. Exit codes: 0 done,
    1 failed, 2 usage or definition error, 130 interrupted by Ctrl-C.

    Example: minikafka topics --source data/homelab.sqlite
    """
    working_directory_on_path()

"""The ``minikafka`` click group every command module attaches to."""

from __future__ import annotations

import os
import sqlite3
import sys

import click

from ..errors import MinikafkaError


def working_directory_on_path() -> None:
    """Make modules in the working directory importable (``schemas.*``, ``jobs.*``), as
    spark-submit stages get them, but after the installed packages: a local file never
    shadows an installed one."""
    cwd = os.getcwd()
    if not any(os.path.abspath(p or os.curdir) == cwd for p in sys.path):
        sys.path.append(cwd)


class _Group(click.Group):
    """The command group: a library or SQLite error no command caught is still one ``Error:`` line
    (exit 1), never a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except MinikafkaError as exc:
            raise click.ClickException(str(exc)) from exc
        except sqlite3.Error as exc:
            raise click.ClickException(f"SQLite: {exc}") from exc


@click.group(cls=_Group)
@click.version_option(package_name="minikafka")
def main() -> None:
    """Typed, durable pipelines with one SQLite file as the state ledger.

    Commands that read or write a ledger take --source FILE (or $MINIKAFKA_SOURCE, or
    --pipeline FILE for the pipeline's ledger); --json prints machine-readable output.

    Example: minikafka topics --source data/homelab.sqlite
    """
    working_directory_on_path()

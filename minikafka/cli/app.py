"""The ``minikafka`` click group every command module attaches to."""

from __future__ import annotations

import click


@click.group()
@click.version_option(package_name="minikafka")
def main() -> None:
    """Typed, durable pipelines with one SQLite file as the state ledger."""

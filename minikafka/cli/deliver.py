"""``minikafka deliver``: the HTTP delivery worker (connectors/delivery.py) as a command."""

from __future__ import annotations

import signal

import click

from ..connectors.delivery import DeliveryWorker, load_deliveries
from ..errors import DeliveryConfigError, MinikafkaError
from .app import main
from .common import DefinitionProblem, require_ledger


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--once", is_flag=True, help="Deliver everything pending, then exit (for cron).")
@click.option("--source", "-s", "source_path", default=None,
              help="The SQLite ledger (default: the file's 'source' or [pipeline].source).")
def deliver(file: str, once: bool, source_path: str | None) -> None:
    """POST each topic partition's pending rows to its endpoint as a consumer group.

    FILE holds [[deliveries]] tables (a pipeline file may too). A 2xx answer commits
    the batch; failures are retried with backoff (and quarantined after max_attempts).
    Without --once the worker runs until SIGTERM or SIGINT, finishes the batches in
    flight, commits them and exits 0.

    Example: minikafka deliver examples/deliveries.toml --once
    """
    try:
        defn = load_deliveries(file)
    except MinikafkaError as exc:
        raise DefinitionProblem(str(exc)) from exc
    path = source_path or (str(defn.source) if defn.source else None)
    if path is None:
        raise DefinitionProblem(f"{file}: no ledger: set 'source' in the file or pass --source")
    require_ledger(path, hint=f"check 'source' in {file} (or --source)")  # delivering never creates one
    worker = DeliveryWorker(path, defn.deliveries, once=once, progress=lambda line: click.echo(line, err=True))

    def on_signal(signum, _frame):
        click.echo(f"deliver: {signal.Signals(signum).name}: finishing the batches in flight", err=True)
        worker.stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        summary = worker.run()
    except DeliveryConfigError as exc:  # a header's variable unset or unsendable: the file's problem
        raise DefinitionProblem(str(exc)) from exc
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for line in summary.lines():
        click.echo(line)
    if summary.errors:
        raise click.ClickException("delivery incomplete:\n  " + "\n  ".join(summary.errors))

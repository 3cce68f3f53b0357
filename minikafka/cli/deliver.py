"""``minikafka deliver``: the HTTP delivery worker (connectors/delivery.py) as a command."""

from __future__ import annotations

import signal

import click

from ..errors import DeliveryConfigError, MinikafkaError
from .app import INTERRUPTED, main
from .common import DefinitionProblem, echo_json, json_option, require_ledger
from .output import progress


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--once", is_flag=True, help="Deliver everything pending, then exit (for cron).")
@click.option("--source", "-s", "source_path", default=None,
              help="The SQLite ledger (default: the file's 'source' or [pipeline].source).")
@json_option
def deliver(file: str, once: bool, source_path: str | None, as_json: bool) -> None:
    """POST each topic partition's pending rows to its endpoint as a consumer group.

    FILE holds [[deliveries]] tables (a pipeline file may too). A 2xx answer commits
    the batch; failures are retried with backoff (and quarantined after max_attempts).
    Without --once the worker runs until SIGTERM or SIGINT, finishes the batches in
    flight, commits them and exits 0 (SIGTERM) or 130 (SIGINT, Ctrl-C; the run log
    then says 'interrupted'). Progress goes to stderr: a live line on a terminal, else a
    line only when a count changed (an idle worker writes nothing).

    --json prints one object instead of the summary lines: {delivered, quarantined,
    seconds, run_ids, errors, interrupted, partitions: [{group, topic, partition,
    delivered, batches, failed_attempts, quarantined, committed, lag, error}]}.

    Example: minikafka deliver examples/deliveries.toml --once
    """
    from dataclasses import asdict

    from ..connectors.delivery import DeliveryWorker, load_deliveries  # here: httpx costs every other command 50 ms

    try:
        defn = load_deliveries(file)
    except MinikafkaError as exc:
        raise DefinitionProblem(str(exc)) from exc
    path = source_path or (str(defn.source) if defn.source else None)
    if path is None:
        raise DefinitionProblem(f"{file}: no ledger: set 'source' in the file or pass --source")
    require_ledger(path, hint=f"check 'source' in {file} (or --source)")  # delivering never creates one
    received: list[int] = []
    with progress("deliver") as shown:
        worker = DeliveryWorker(path, defn.deliveries, once=once,
                                progress=lambda line: shown.update(line.removeprefix("deliver: ")))

        def on_signal(signum, _frame):
            received.append(signum)
            shown.log(f"deliver: {signal.Signals(signum).name}: finishing the batches in flight")
            worker.stop()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            summary = worker.run()
        except DeliveryConfigError as exc:  # a header's variable unset or unsendable: the file's problem
            raise DefinitionProblem(str(exc)) from exc
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    interrupted = signal.SIGINT in received
    if interrupted:
        from ..api.source import Source
        from ..ledger.consuming import mark_interrupted_in_current_transaction

        with Source(path) as source, source.ledger.atomic() as conn:
            mark_interrupted_in_current_transaction(conn, summary.run_ids)
    if as_json:
        echo_json({"delivered": summary.delivered, "quarantined": summary.quarantined,
                   "seconds": round(summary.seconds, 3), "run_ids": summary.run_ids, "errors": summary.errors,
                   "interrupted": interrupted, "partitions": [asdict(p) for p in summary.partitions]})
    else:
        for line in summary.lines():
            click.echo(line)
    if summary.errors:
        raise click.ClickException("delivery incomplete:\n  " + "\n  ".join(summary.errors))
    if interrupted:
        raise click.exceptions.Exit(INTERRUPTED)

"""The ``work`` command: worker processes for a queue."""

from __future__ import annotations

import sys

import click

from ..errors import MinikafkaError
from .app import main


@main.command()
@click.argument("handler", metavar="MODULE:FUNCTION")
@click.option("--queue", "queue_name", required=True,
              help="The queue: a topic made by source.queue(NAME, ...), or TOPIC:CONSUMER for topic.queue(CONSUMER).")
@click.option("--concurrency", "-c", default=1, show_default=True, type=click.IntRange(min=1),
              help="Worker processes.")
@click.option("--once", is_flag=True, help="Exit when nothing is claimable instead of waiting for more jobs.")
@click.option("--retry-delay", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds before the first retry of a failed job; doubles with each attempt.")
@click.option("--source", "-s", "source_path", default="data/homelab.sqlite", show_default=True,
              help="The SQLite ledger file.")
def work(handler: str, queue_name: str, concurrency: int, once: bool, retry_delay: float, source_path: str) -> None:
    """Run MODULE:FUNCTION on every job of a queue in N worker processes.

    A return acks the job; an exception retries it after retry_delay * 2**(attempts-1)
    seconds, and the dead letter takes it once its attempts are used up. SIGTERM lets
    the jobs in flight finish. Progress goes to stderr, a summary line to stdout, and
    the run to the run log.

    Example: minikafka work myjobs:summarise --queue rss.summarise --concurrency 4
    """
    from ..api.workers import work as run_work

    def progress(r) -> None:
        click.echo(f"  {r.duration_s:7.1f} s  claimed {r.claimed}  acked {r.acked}  retried {r.retried}  "
                   f"dead {r.dead}", err=True)

    try:
        result = run_work(source_path, queue_name, handler, concurrency=concurrency, once=once,
                          retry_delay=retry_delay, progress=progress)
    except MinikafkaError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(result.summary())
    if result.crashed:
        sys.exit(1)

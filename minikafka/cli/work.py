"""The ``work`` command: worker processes for a queue."""

from __future__ import annotations

import sys

import click

from ..api.source import Source
from ..util.procs import concurrency_limit
from .app import main
from .common import with_source


@main.command()
@click.argument("handler", metavar="MODULE:FUNCTION")
@click.option("--queue", "queue_name", required=True,
              help="The queue: a topic made by source.queue(NAME, ...), or TOPIC:CONSUMER for topic.queue(CONSUMER).")
@click.option("--concurrency", "-c", default=1, show_default=True, type=click.IntRange(min=1, max=concurrency_limit()),
              help=f"Worker processes (at most {concurrency_limit()}: 4 per CPU, at least 32, at most 256).")
@click.option("--once", is_flag=True, help="Exit when nothing is claimable instead of waiting for more jobs.")
@click.option("--retry-delay", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds before the first retry of a failed job; doubles with each attempt.")
@with_source
def work(source: Source, handler: str, queue_name: str, concurrency: int, once: bool, retry_delay: float) -> None:
    """Run MODULE:FUNCTION on every job of a queue in N worker processes.

    A return acks the job; an exception retries it after retry_delay * 2**(attempts-1)
    seconds, and the dead letter takes it once its attempts are used up. SIGTERM lets
    the jobs in flight finish. Progress goes to stderr, a summary line to stdout, and
    the run to the run log.

    Example: minikafka work myjobs:summarise --queue rss.summarise --concurrency 4 -s homelab.sqlite
    """
    from ..api.modes.workers import work as run_work

    def progress(r) -> None:
        click.echo(f"  {r.duration_s:7.1f} s  claimed {r.claimed}  acked {r.acked}  retried {r.retried}  "
                   f"dead {r.dead}", err=True)

    path = source.path
    source.close()  # each worker opens its own: no connection crosses the fork
    result = run_work(path, queue_name, handler, concurrency=concurrency, once=once,
                      retry_delay=retry_delay, progress=progress, open_source=Source)
    click.echo(result.summary())
    if result.crashed:
        sys.exit(1)

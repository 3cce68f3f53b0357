"""The ``work`` command: worker processes for a queue."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ..util.procs import concurrency_limit
from .app import INTERRUPTED, main
from .common import echo_json, json_option, with_source
from .output import note, progress

if TYPE_CHECKING:  # the API is imported by the call that opens a Source, not by every command
    from ..api.source import Source  # noqa: F811 (imported again where it is called)


@main.command()
@click.argument("handler", metavar="MODULE:FUNCTION")
@click.option("--queue", "queue_name", required=True,
              help="The queue: a topic made by source.queue(NAME, ...), or TOPIC:CONSUMER for topic.queue(CONSUMER).")
@click.option("--concurrency", "-c", default=1, show_default=True, type=click.IntRange(min=1, max=concurrency_limit()),
              help=f"Worker processes: at most {concurrency_limit()} on this machine (the limit is 4 per CPU, "
                   "but never below 32 nor above 256).")
@click.option("--once", is_flag=True, help="Exit when nothing is claimable instead of waiting for more jobs.")
@click.option("--retry-delay", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds before the first retry of a failed job; doubles with each attempt.")
@json_option
@with_source
def work(source: Source, handler: str, queue_name: str, concurrency: int, once: bool, retry_delay: float,
         as_json: bool) -> None:
    """Run MODULE:FUNCTION on every job of a queue in N worker processes.

    A return acks the job; an exception retries it after retry_delay * 2**(attempts-1)
    seconds, and the dead letter takes it once its attempts are used up. A return value
    JSON cannot hold (a datetime, a set, bytes, NaN) sends the job to the dead letter at
    once with that refusal as its error: it never runs twice for it. A worker process that
    dies (a crash, a kill) is replaced, up to 3 times per worker. SIGTERM lets
    the jobs in flight finish (exit 0); Ctrl-C (SIGINT) too, then exits 130 and the run
    log says 'interrupted'. Progress goes to stderr (a live line on a terminal, else a
    line only when a count changed), a summary line to stdout, and the run to the run log.

    --json prints one object instead of the summary: {run_id, queue, workers, claimed,
    acked, retried, dead, lost, crashed, interrupted, seconds, errors}.

    Example: minikafka work examples.myjobs:summarise --queue rss.summarise --concurrency 2 --once -s data/homelab.sqlite
    """
    from ..api.modes.workers import work as run_work
    from ..api.source import Source

    path = source.path
    source.close()  # each worker opens its own: no connection crosses the fork
    with progress(f"work {queue_name}") as shown:
        def report(r) -> None:
            shown.update(f"claimed {r.claimed}, acked {r.acked}, retried {r.retried}, dead {r.dead}")

        result = run_work(path, queue_name, handler, concurrency=concurrency, once=once,
                          retry_delay=retry_delay, progress=report, open_source=Source)
    if as_json:
        echo_json({"run_id": result.run_id, "queue": result.queue, "workers": result.workers,
                   "claimed": result.claimed, "acked": result.acked, "retried": result.retried, "dead": result.dead,
                   "lost": result.lost, "crashed": result.crashed, "interrupted": result.interrupted,
                   "seconds": round(result.duration_s, 3), "errors": result.errors})
    else:
        click.echo(result.summary())
    if result.crashed:
        sys.exit(1)
    if result.interrupted:
        note("interrupted (Ctrl-C): the jobs in flight finished; the run log says 'interrupted'")
        sys.exit(INTERRUPTED)

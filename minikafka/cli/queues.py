"""The ``queue`` commands: look up and cancel one job of a work queue."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .app import main
from .common import echo_json, json_option, with_source

if TYPE_CHECKING:  # the API is imported by the call that opens a Source, not by every command
    from ..api.source import Source


@main.group()
def queue() -> None:
    """Work queues: look up one job, cancel one.

    Example: minikafka queue get rss.summarise 1 --source data/homelab.sqlite
    """


@queue.command("get")
@click.argument("name", metavar="QUEUE")
@click.argument("job_id", type=click.IntRange(min=1), metavar="JOB_ID")
@json_option
@with_source
def get(source: Source, name: str, job_id: int, as_json: bool) -> None:
    """Print one job of QUEUE: state, attempts, run_at, last error, result.

    QUEUE is a topic made by source.queue(NAME, ...), or TOPIC:CONSUMER.

    Example: minikafka queue get rss.summarise 1 --json -s data/homelab.sqlite
    """
    from ..api.modes.queues import open_queue

    info = open_queue(source, name).get(job_id)
    if info is None:
        raise click.ClickException(f"queue {name!r} has no job {job_id}")
    if as_json:
        echo_json(info.asdict())
        return
    for key, value in info.asdict().items():
        if value is not None:
            click.echo(f"{key:17} {value}")


@queue.command("cancel")
@click.argument("name", metavar="QUEUE")
@click.argument("job_ids", nargs=-1, required=True, type=click.IntRange(min=1), metavar="JOB_ID...")
@json_option
@with_source
def cancel(source: Source, name: str, job_ids: tuple[int, ...], as_json: bool) -> None:
    """Cancel pending or running jobs of QUEUE: they never run (again); a worker holding one
    finds its ack refused.

    Example: minikafka queue cancel rss.summarise 2 -s data/homelab.sqlite
    """
    from ..api.modes.queues import open_queue

    q = open_queue(source, name)
    cancelled = [j for j in job_ids if q.cancel(j)]
    if as_json:
        echo_json({"cancelled": cancelled, "not_cancelled": [j for j in job_ids if j not in cancelled]})
        return
    for j in job_ids:
        click.echo(f"job {j}: " + ("cancelled" if j in cancelled else "not pending or running (nothing changed)"))

"""The ``schedule`` commands: periodic jobs of queues (list, add, pause, resume, remove, tick, run)."""

from __future__ import annotations

import json
import logging
import threading
from typing import TYPE_CHECKING

import click

from .app import main
from .common import echo_json, json_option, with_source

if TYPE_CHECKING:  # the API is imported by the call that opens a Source, not by every command
    from ..api.source import Source


@main.group()
def schedule() -> None:
    """Periodic jobs: a payload enqueued into a queue on a cron expression (UTC) or every N seconds.

    Jobs are enqueued by whichever process ticks while holding the ledger's leader lease
    (``schedule run``, or ``schedule tick`` from cron); a due time fires once however many tick.

    Example: minikafka schedule add nightly --queue rss.summarise --cron "0 3 * * *" --payload '{"url": "https://example.com/daily", "body": "The daily digest."}' -s data/homelab.sqlite
    """


def _echo(info) -> None:
    what = f"cron {info.cron!r}" if info.cron else f"every {info.every:g}s"
    if info.queue_dropped:
        state = "queue dropped: fires nothing (open the queue again, or remove the schedule)"
    else:
        state = "paused" if info.paused else f"next {info.next_due.isoformat()}"
    click.echo(f"{info.name:20} {info.queue:20} {what:24} {state}  payload={json.dumps(info.payload)}")
    if info.last_error:
        click.echo(f"{'':20} skipped {info.skipped} fire(s), last at {info.last_error_at.isoformat()}: "
                   f"{info.last_error}")


def _echo_skip(s) -> None:
    click.echo(f"{s.schedule}: skipped due {s.due.isoformat()}: {s.error}")


def _skips_said_here() -> None:
    """These commands print each skipped fire themselves: the library's warning about it is not
    repeated on stderr by Python's last-resort handler (``--debug`` still shows it)."""
    logger = logging.getLogger("minikafka.schedules")
    handler = logging.NullHandler()
    logger.addHandler(handler)
    click.get_current_context().call_on_close(lambda: logger.removeHandler(handler))


@schedule.command("list")
@json_option
@with_source
def list_(source: Source, as_json: bool) -> None:
    """List the ledger's schedules.

    Example: minikafka schedule list -s data/homelab.sqlite
    """
    infos = source.scheduler().list()
    if as_json:
        echo_json([i.asdict() for i in infos])
        return
    if not infos:
        click.echo("no schedules")
    for info in infos:
        _echo(info)


@schedule.command("add")
@click.argument("name")
@click.option("--queue", "queue_name", required=True, help="The queue (a topic made by source.queue, or TOPIC:CONSUMER).")
@click.option("--cron", help="A five-field cron expression, in UTC (needs minikafka[schedules]).")
@click.option("--every", type=click.FloatRange(min=0, min_open=True), help="Or a period in seconds.")
@click.option("--payload", default="{}", show_default=True, help="The job's payload as JSON.")
@click.option("--priority", default=0, show_default=True, type=int)
@click.option("--max-catch-up", default=1, show_default=True, type=click.IntRange(min=1),
              help="After downtime, how many of the latest missed due times fire.")
@json_option
@with_source
def add(source: Source, name: str, queue_name: str, cron: str | None, every: float | None, payload: str,
        priority: int, max_catch_up: int, as_json: bool) -> None:
    """Create the schedule NAME, or replace it by another definition (the same one again changes
    nothing: its clock keeps running). A queue whose topic has dedup fields is refused.

    Example: minikafka schedule add ping --queue rss.summarise --every 300 --payload '{"url": "https://example.com/ping", "body": "ping"}' -s data/homelab.sqlite
    """
    from ..api.modes.queues import open_queue

    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from None
    try:
        info = open_queue(source, queue_name).schedule(name, cron=cron, every=every, payload=data,
                                                       priority=priority, max_catch_up=max_catch_up)
    except ValueError as exc:
        raise click.UsageError(str(exc).splitlines()[0]) from None
    if as_json:
        echo_json(info.asdict())
    else:
        _echo(info)


def _simple(action: str):
    @schedule.command(action)
    @click.argument("name")
    @with_source
    def command(source: Source, name: str) -> None:
        getattr(source.scheduler(), action)(name)
        click.echo(f"schedule {name}: {action}d" if action != "remove" else f"schedule {name}: removed")

    command.__doc__ = {
        "pause": "Stop firing NAME until resumed.\n\n    Example: minikafka schedule pause ping -s data/homelab.sqlite",
        "resume": "Fire NAME again, from its first due time after now.\n\n"
                  "    Example: minikafka schedule resume ping -s data/homelab.sqlite",
        "remove": "Delete NAME.\n\n    Example: minikafka schedule remove ping -s data/homelab.sqlite",
    }[action]
    command.help = command.__doc__
    return command


for _action in ("pause", "resume", "remove"):
    _simple(_action)


@schedule.command("tick")
@json_option
@with_source
def tick(source: Source, as_json: bool) -> None:
    """Fire what is due now (when no other process holds the leader lease), then exit: for cron.

    When another process holds the lease, says which and until when (on stderr with --json).
    A schedule that cannot fire is skipped, and said so; the others fire.

    Example: * * * * * minikafka schedule tick -s data/homelab.sqlite
    """
    _skips_said_here()
    sched = source.scheduler()
    fired = sched.tick()
    lease = sched.lease()
    sched.release()  # a one-shot: the next tick (this command again, or a `schedule run`) may lead
    other = None
    if lease is not None and lease.holder != sched.holder:
        other = (f"nothing fired: another process leads ({lease.holder!r} holds the scheduler lease until "
                 f"{lease.expires_at.isoformat()})")
    if as_json:
        echo_json([{"schedule": f.schedule, "due": f.due.isoformat(), "job_id": f.job_id} for f in fired])
        for s in sched.skipped:
            click.echo(f"{s.schedule}: skipped due {s.due.isoformat()}: {s.error}", err=True)
        if other:
            click.echo(other, err=True)
        return
    for f in fired:
        click.echo(f"{f.schedule}: due {f.due.isoformat()} -> job {f.job_id}")
    for s in sched.skipped:
        _echo_skip(s)
    if other:
        click.echo(other)
    elif not fired and not sched.skipped:
        click.echo("nothing due")


@schedule.command("run")
@with_source
def run(source: Source) -> None:
    """Tick until interrupted (Ctrl-C or SIGTERM), firing each due time as it comes.

    A schedule that cannot fire is skipped (a line says why); the others keep firing.

    Example: minikafka schedule run -s data/homelab.sqlite
    """
    import signal

    _skips_said_here()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    counts = {"fired": 0, "skipped": 0}

    def fire(f) -> None:
        counts["fired"] += 1
        click.echo(f"{f.schedule}: due {f.due.isoformat()} -> job {f.job_id}")

    def skip(s) -> None:
        counts["skipped"] += 1
        _echo_skip(s)

    try:
        source.scheduler().run(stop, on_fire=fire, on_skip=skip)
    except KeyboardInterrupt:
        pass
    click.echo(f"schedule run: fired {counts['fired']} due time(s), skipped {counts['skipped']}")

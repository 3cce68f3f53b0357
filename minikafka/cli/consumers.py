"""The consumers command: who reads each topic, how far behind, when last active; drop one."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..ledger.consuming import consumer_info
from ..ledger.topics import acks
from .app import main
from .common import echo_json, json_option, with_source

if TYPE_CHECKING:  # the API is imported by the call that opens a Source, not by every command
    from ..api.source import Source


@main.command()
@click.argument("topic", required=False)
@click.option("--drop", "drop_name", metavar="NAME", help="Unregister consumer NAME (of TOPIC, or of every topic).")
@json_option
@with_source(read_only=lambda kw: not kw.get("drop_name"))
def consumers(source: Source, topic: str | None, drop_name: str | None, as_json: bool) -> None:
    """List consumers with their lag (rows still pending) and last activity; drop one.

    With --pipeline FILE, consumers no stage of that pipeline uses are marked
    'retired': a renamed or removed stage still holds rows 'new' for everyone until
    it is dropped. Dropping a consumer turns rows every remaining consumer acked
    'handled'.

    --json prints a list of {topic, name, created_at, lag, last_activity, last_run_id,
    in_pipeline} (in_pipeline is null without --pipeline).

    Example: minikafka consumers --pipeline conf/homelab.toml --drop old_summary
    """
    if topic is not None:
        source.layout(topic)
    if drop_name:
        _drop(source, topic, drop_name, as_json)
        return
    from ..pipelines.retired import retired_messages, used_consumers

    ctx = click.get_current_context()
    defn = ctx.meta.get("minikafka.pipeline")
    used = used_consumers(defn) if defn else None
    rows = []
    for info in consumer_info(source.ledger.conn, topic):
        d = info.as_dict()
        d["in_pipeline"] = None if used is None else (info.topic, info.name) in used
        rows.append(d)
    if as_json:
        echo_json(rows)
        return
    click.echo(f"{'topic':26} {'consumer':24} {'lag':>9}  {'last activity':27} {'last run'}")
    for d in rows:
        flag = "  (retired: no stage of the pipeline reads it)" if d["in_pipeline"] is False else ""
        click.echo(f"{d['topic'][:26]:26} {d['name'][:24]:24} {d['lag']:>9}  {d['last_activity'] or 'never':27} "
                   f"{d['last_run_id'] or ''}{flag}")
    if defn is not None:
        for line in retired_messages(defn, source.ledger.conn, topic=topic):
            click.echo(line, err=True)


def _drop(source: Source, topic: str | None, name: str, as_json: bool) -> None:
    conn = source.ledger.conn
    targets = [topic] if topic else [t for t in source.topics() if acks.find_consumer(conn, t, name) is not None]
    if not targets:
        raise click.ClickException(f"no consumer {name!r} on any topic of {source.path}")
    done = {}
    with source.ledger.atomic() as conn:
        for t in targets:
            cid = acks.require_consumer(conn, t, name)
            done[t] = acks.drop_consumer_in_current_transaction(conn, t, cid)
    if as_json:
        echo_json([{"topic": t, "dropped": name, "rows_handled": n} for t, n in done.items()])
        return
    for t, n in done.items():
        click.echo(f"dropped consumer {name} from {t}; {n} row(s) now handled by every remaining consumer")

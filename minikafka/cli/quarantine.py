"""The quarantine command: list, show, requeue and purge dead-lettered rows of a topic."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from ..ledger.consuming import quarantine as store
from ..util.redact import redact_and_cut
from .app import main
from .common import echo_json, json_option, pipeline_model, with_source

if TYPE_CHECKING:  # the API is imported by the call that opens a Source, not by every command
    from ..api.source import Source

ACTIONS = ("list", "show", "requeue", "purge")


def _ids(values: tuple[str, ...]) -> list[int]:
    try:
        return [int(v) for v in values]
    except ValueError:
        raise click.BadParameter(f"quarantine ids are numbers, got {' '.join(values)!r}", param_hint="IDS") from None


@main.command()
@click.argument("topic")
@click.argument("action", required=False, default="list", metavar="[list|show|requeue|purge|ID]")
@click.argument("ids", nargs=-1, metavar="[IDS]...")
@click.option("--all", "everything", is_flag=True, help="requeue/purge: every quarantined row of the topic.")
@click.option("--older-than", metavar="AGE", help="purge: only rows quarantined longer ago than AGE (e.g. 30d).")
@click.option("--model", metavar="module:Class",
              help="requeue: the topic's model (default: the --pipeline's, else the one recorded in the ledger).")
@click.option("--rerun", is_flag=True,
              help="requeue: an output a stage's expectation set aside makes its input row pending for the "
                   "stage again (computed again, e.g. once a lookup row arrived) instead of being appended.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1), help="list: rows to print.")
@json_option
@with_source(read_only=lambda kw: kw.get("action") not in ("requeue", "purge"))
def quarantine(source: Source, topic: str, action: str, ids: tuple[str, ...], everything: bool,
               older_than: str | None, model: str | None, rerun: bool, limit: int, as_json: bool) -> None:
    """Dead-lettered rows of TOPIC: list them, show one, requeue or purge them.

    \b
    minikafka quarantine TOPIC               list (newest first): id, origin, reason
    minikafka quarantine TOPIC ID            show one row in full (also: show ID)
    minikafka quarantine TOPIC requeue ID... put rows back (or --all): a row a stage or
                                             a delivery gave up on becomes pending for its
                                             consumer (or delivery group) again;
                                             a file line or failed output is validated
                                             again and appended (--rerun: the stage
                                             computes it again from its input row).
                                             Rows that still fail stay; exit 1 when
                                             every row still fails.
    minikafka quarantine TOPIC purge ID...   delete rows (or --all, --older-than 30d)

    --json keys: id, topic, consumer, run_id, row_id, payload, reason, attempts, origin, created_at.

    Example: minikafka quarantine rss.items --source data/homelab.sqlite
    """
    source.layout(topic)
    conn = source.ledger.conn
    if action.isdigit():
        action, ids = "show", (action, *ids)
    if action not in ACTIONS:
        raise click.BadParameter(f"{action!r}: use one of {', '.join(ACTIONS)} or a quarantine id",
                                 param_hint="ACTION")
    numbers = _ids(ids)
    if action == "list":
        rows = store.list_quarantined(conn, topic, limit=limit)
        if as_json:
            echo_json(rows)
            return
        total = store.count_quarantined(conn, topic)
        click.echo(f"{total} row(s) of {topic} in quarantine" + (f"; newest {len(rows)}" if total > len(rows) else ""))
        for r in rows:
            where = r["origin"] or ""
            if r["consumer"]:
                where += f" consumer={r['consumer']}"
            if r["row_id"] is not None:
                where += f" row={r['row_id']}"
            click.echo(f"{r['id']:>6}  {r['created_at']}  {where.strip():34} {redact_and_cut(r['reason'], 120)}")
        return
    if action == "show":
        if len(numbers) != 1:
            raise click.BadParameter("show takes one quarantine id", param_hint="IDS")
        row = store.get_quarantined(conn, numbers[0])
        if row is None or row["topic"] != topic:
            raise click.ClickException(f"no quarantined row {numbers[0]} in topic {topic!r}")
        if as_json:
            echo_json(row)
            return
        for key in store.COLUMNS:
            if key != "payload":
                click.echo(f"{key:11} {row[key]}")
        click.echo("payload:")
        click.echo(_pretty(row["payload"]))
        return
    if not numbers and not everything and not (action == "purge" and older_than):
        raise click.UsageError(f"{action}: name the ids to {action}, or pass --all"
                               + (" or --older-than AGE" if action == "purge" else ""))
    if numbers and everything:
        raise click.UsageError("give ids or --all, not both")
    if action == "purge":
        _purge(source, topic, numbers or None, older_than, as_json)
    else:
        _requeue(source, topic, numbers or None, model, as_json, rerun)


def _pretty(payload: str | None) -> str:
    try:
        return json.dumps(json.loads(payload or ""), indent=2, ensure_ascii=False)
    except ValueError:
        return payload or ""


def _purge(source: Source, topic: str, ids: list[int] | None, older_than: str | None, as_json: bool) -> None:
    from ..errors import InvalidDurationError
    from ..ledger.consuming import cutoff
    from ..util.duration import parse_timedelta

    before = None
    if older_than:
        try:
            before = cutoff(parse_timedelta(older_than, what="AGE"))
        except InvalidDurationError as exc:
            raise click.BadParameter(str(exc), param_hint="--older-than") from exc
    with source.ledger.atomic() as conn:
        if ids is not None:
            found = {r["id"] for r in store.list_quarantined(conn, topic, limit=None, ids=ids)}
            missing = sorted(set(ids) - found)
            if missing:
                raise click.ClickException(f"no quarantined row(s) {missing} in topic {topic!r}; nothing purged")
        n = store.purge_in_current_transaction(conn, topic, ids=ids, before=before)
    if as_json:
        echo_json({"topic": topic, "purged": n})
    else:
        click.echo(f"purged {n} quarantined row(s) of {topic}")


def _requeue(source: Source, topic: str, ids: list[int] | None, model: str | None, as_json: bool,
             rerun: bool = False) -> None:
    from ..api.core.requeue import requeue_named
    from .data import import_model

    result = requeue_named(source, topic, ids, import_model(model) if model else pipeline_model(topic), rerun=rerun)
    nothing = bool(result.failed) and result.requeued == 0
    if as_json:
        echo_json({"topic": topic, "appended": result.appended, "replayed": result.replayed,
                   "duplicates": result.duplicates, "still_failing": [{"id": i, "reason": r} for i, r in result.failed]})
    else:
        click.echo(f"requeued {result.requeued} row(s) of {topic}: {result.appended} appended, {result.replayed} "
                   f"pending again for their consumer, {result.duplicates} already in the topic")
        if not nothing:
            for qid, reason in result.failed:
                click.echo(f"  still quarantined {qid}: {redact_and_cut(reason, 200)}", err=True)
    if nothing:
        # like ingest when no line could be stored: a "success" that did nothing is an error
        rows = "\n".join(f"  {qid}: {redact_and_cut(reason, 200)}" for qid, reason in result.failed)
        raise click.ClickException(
            f"no row of {topic} could be requeued: all {len(result.failed)} still fail and stay in the quarantine "
            f"(attempts counted); fix the model or pass --model, or purge them:\n{rows}")

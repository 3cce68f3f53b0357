"""Commands that read and fix the ledger: topics, status, show, replay."""

from __future__ import annotations

import click

from ..api.source import Source
from ..ledger.layout import TopicLayout
from .app import main
from .common import _row_json, status_where, with_source


@main.command()
@with_source
def topics(source: Source) -> None:
    """List topics with their new/handled counts, and each consumer (group) with its
    committed offset and lag per partition.

    Example: minikafka topics --source data/homelab.sqlite
    """
    from ..ledger import acks

    conn = source._ledger.conn
    click.echo(f"{'topic':30} {'new':>10} {'handled':>10} {'parts':>5}  consumers")
    for name in source.topics():
        layout = source.layout(name)
        where, params = acks.pending_filter(None, name)
        new, total = conn.execute(
            f"SELECT (SELECT count(*) FROM {layout.table} WHERE {where}), count(*) FROM {layout.table}", params
        ).fetchone()
        consumers = acks.consumer_names(conn, name)
        click.echo(f"{name:30} {new:>10} {total - new:>10} {layout.partitions:>5}  {', '.join(consumers)}")
        for consumer in consumers:
            cid = acks.find_consumer(conn, name, consumer)
            offsets, lag = acks.committed_offsets(conn, cid), acks.lag(conn, name, cid)
            parts = "  ".join(f"p{p}: committed {offsets.get(p, 0)} lag {lag[p]}" for p in sorted(lag))
            click.echo(f"    {consumer:26} {parts}")


@main.command()
@click.option("--stage", help="Only this stage.")
@click.option("--limit", default=20, show_default=True)
@with_source
def status(source: Source, stage: str | None, limit: int) -> None:
    """Show the last runs from the run log.

    Example: minikafka status --stage summarise
    """
    click.echo(f"{'started':27} {'stage':28} {'status':10} {'in':>8} {'out':>8} {'dup':>6} {'fail':>5} {'quar':>5} {'sec':>7}")
    for run in source.runs(stage=stage, limit=limit):
        click.echo(
            f"{run['started_at']:27} {(run['stage'] or '')[:28]:28} {run['status']:10} {run['rows_in']:>8} "
            f"{run['rows_out']:>8} {run['rows_duplicate']:>6} {run['rows_failed']:>5} {run['rows_quarantined']:>5} "
            f"{(run['duration_s'] or 0):>7.2f}"
        )
        if run["error"]:
            click.echo(f"    error: {run['error'][:300]}")
        for suite in (run["quality"] or {}).get("suites", []):
            failed = [r for r in suite["results"] if not r["success"]]
            verdict = "passed" if suite["success"] else f"{len(failed)} of {len(suite['results'])} failed"
            click.echo(f"    quality {suite['suite']} ({suite['policy']}): {verdict}"
                       + (f", {suite['quarantined_rows']} row(s) quarantined" if suite["quarantined_rows"] else ""))
            for r in failed:
                click.echo(f"      - {r['expectation']}({r['column'] or ''}) unexpected={r['unexpected_count']} "
                           f"observed={r['observed_value']}")
        if (run["quality"] or {}).get("report"):
            click.echo(f"    report: {run['quality']['report']}")


@main.command()
@click.argument("topic")
@click.option("--status", "which", type=click.Choice(["new", "handled", "all"]), default="all", show_default=True)
@click.option("--limit", default=10, show_default=True)
@with_source
def show(source: Source, topic: str, which: str, limit: int) -> None:
    """Peek at a topic's rows as JSON lines (metadata first).

    Example: minikafka show rss.items --status new --limit 5
    """
    layout: TopicLayout = source.layout(topic)
    where, params, fix = status_where(source, layout, which)
    decode = layout.decoder()
    rows = source._ledger.conn.execute(
        f"{layout.select_sql()} WHERE {where} ORDER BY \"_id\" LIMIT ?", (*params, limit)).fetchall()
    for row in rows:
        click.echo(_row_json(fix(row), decode))


@main.command()
@click.argument("topic")
@click.option("--consumer", required=True, help="The consumer whose acks are reset.")
@click.option("--from-id", type=int, default=None)
@click.option("--to-id", type=int, default=None)
@with_source
def replay(source: Source, topic: str, consumer: str, from_id: int | None, to_id: int | None) -> None:
    """Make a range of rows pending again for one consumer.

    Example: minikafka replay rss.items --consumer summarise --from-id 100 --to-id 200
    """
    from ..ledger import acks
    from ..util.clock import utc_now

    source.layout(topic)
    lo, hi = from_id or 0, to_id if to_id is not None else 2**63 - 1
    if lo > hi:
        raise click.BadParameter("--from-id is greater than --to-id")
    with source._ledger.atomic() as conn:
        cid = acks.require_consumer(conn, topic, consumer)
        n = acks.replay_in_current_transaction(conn, topic, cid, lo, hi, utc_now())
    click.echo(f"{n} row(s) of {topic} pending again for consumer {consumer}")

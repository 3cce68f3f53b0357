"""Maintenance of the ledger's bookkeeping: prune old runs and quality reports."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

import click

from ..errors import InvalidDurationError, SchemaMismatchError
from ..ledger.consuming import runlog_retention
from ..util.duration import parse_timedelta
from .app import main
from .common import echo_json, json_option, with_source

if TYPE_CHECKING:  # the API is imported by the call that opens a Source, not by every command
    from ..api.source import Source


def _age(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_timedelta(value, what="AGE")
    except InvalidDurationError as exc:
        raise click.BadParameter(str(exc)) from exc


@main.command()
@click.option("--runs-older-than", callback=_age, metavar="AGE",
              help="Delete run-log rows started longer ago than AGE (30d, 12h, 2w); each stage's latest run stays.")
@click.option("--reports-older-than", callback=_age, metavar="AGE",
              help="Delete quality reports (quality-reports/*.html beside the ledger) older than AGE.")
@json_option
@with_source
def prune(source: Source, runs_older_than, reports_older_than, as_json: bool) -> None:
    """Retention: drop old run-log rows and quality reports. Topics are never touched.

    The latest run of each stage is kept however old, so 'status' still says when a
    stage last ran. --json prints {runs_deleted, reports_deleted, kept_latest}.

    Example: minikafka prune --runs-older-than 30d --reports-older-than 30d
    """
    if runs_older_than is None and reports_older_than is None:
        raise click.UsageError("nothing to prune: pass --runs-older-than AGE and/or --reports-older-than AGE")
    result = runlog_retention.PruneResult()
    if runs_older_than is not None:
        with source.ledger.atomic() as conn:
            result.runs_deleted, result.kept_latest = runlog_retention.prune_runs_in_current_transaction(
                conn, runlog_retention.cutoff(runs_older_than))
    if reports_older_than is not None:
        before = datetime.now(timezone.utc) - reports_older_than
        result.reports_deleted = runlog_retention.prune_reports(runlog_retention.report_dir(source.path), before)
    if as_json:
        echo_json({"runs_deleted": result.runs_deleted, "reports_deleted": result.reports_deleted,
                   "kept_latest": result.kept_latest})
        return
    click.echo(f"pruned {result.runs_deleted} run(s) and {result.reports_deleted} quality report(s)"
               + (f"; kept {len(result.kept_latest)} old run(s) that are their stage's latest"
                  if result.kept_latest else ""))


@main.command()
@with_source
def upgrade(source: Source) -> None:
    """Upgrade a ledger written by an older minikafka to the current format, in one transaction.

    Any write upgrades a ledger (the first ingest, run, ...); reading commands open it
    read-only and never do, so they ask for this command on an older ledger.

    Example: minikafka upgrade --source data/homelab.sqlite
    """
    from ..ledger.transactions import LEDGER_FORMAT

    found = source.ledger.upgraded_from
    if found is None:
        click.echo(f"{source.path}: ledger format {LEDGER_FORMAT}, nothing to upgrade")
    else:
        click.echo(f"{source.path}: upgraded from ledger format {found} to {LEDGER_FORMAT}")


@main.command()
@click.argument("tables", nargs=-1, metavar="[TABLE]...")
@json_option
@with_source
def compact(source: Source, tables: tuple[str, ...], as_json: bool) -> None:
    """Compact keyed tables: delete superseded versions every consumer of the table has acked.

    With no TABLE, every keyed table of the ledger. A consumer that has not read a version
    yet keeps it, and so does a stage run still in progress (what its snapshot may read); the
    current row of a key is never deleted. --json prints {table: deleted}. Each compaction
    leaves a run row (kind compact). 'minikafka nightly' compacts its pipeline's tables after
    the run.

    Example: minikafka compact
    """
    from ..ledger.consuming import RunResult, new_run_id, write_run_in_current_transaction

    run = RunResult(new_run_id("compact"), "compact", stage="compact", inputs=list(tables))
    try:
        deleted = source.compact_tables(list(tables) or None)
    except SchemaMismatchError as exc:
        raise click.ClickException(str(exc)) from exc
    run.outputs, run.rows_out, run.details = sorted(deleted), sum(deleted.values()), {"deleted": deleted}
    with source.ledger.atomic() as conn:
        write_run_in_current_transaction(conn, run.finish("succeeded"))
    if as_json:
        echo_json(deleted)
        return
    if not deleted:
        click.echo("no keyed table to compact")
    for table, n in deleted.items():
        click.echo(f"{table}: {n} superseded version(s) deleted")

"""Commands that look after a ledger's set-up and state: health, doctor."""

from __future__ import annotations

import sys

import click
from click.core import ParameterSource

from .app import main
from .common import SOURCE_ENV, DefinitionProblem, echo_json, json_option, require_ledger, resolve_source_path
from .output import note


def ledger_and_pipeline(source_path: str | None, pipeline: str | None, *, must_exist: bool = True):
    """(ledger path, pipeline definition or None) from --source / --pipeline / $MINIKAFKA_SOURCE.

    The pipeline is loaded without importing its jobs or its expectation suites: these
    commands only read the ledger and the pipeline's limits.
    """
    from ..errors import MinikafkaError
    from ..pipelines.definition import load_pipeline

    ctx = click.get_current_context()
    defn = None
    if pipeline:
        try:
            defn = load_pipeline(pipeline, check_jobs=False, suites=False)
        except MinikafkaError as exc:
            raise DefinitionProblem(str(exc)) from exc
    explicit = source_path is not None and ctx.get_parameter_source("source_path") == ParameterSource.COMMANDLINE
    if explicit or defn is None:
        path = resolve_source_path(ctx, source_path, None)
    else:
        path = str(defn.source)
    if must_exist:
        require_ledger(path)
    return path, defn


def ledger_options(fn):
    fn = click.option("--pipeline", "-p", "pipeline", metavar="FILE",
                      help="The pipeline file: its ledger and its limits (freshness, max_lag, ...).")(fn)
    fn = click.option("--source", "-s", "source_path", envvar=SOURCE_ENV, metavar="FILE",
                      help=f"The SQLite ledger file (default: ${SOURCE_ENV}, or the --pipeline's source).")(fn)
    return fn


@main.command()
@ledger_options
@click.option("--notify", "notify_urls", multiple=True, metavar="URL",
              help="POST to URL when a check's state changes (repeatable); retried with backoff.")
@click.option("--notify-format", type=click.Choice(["json", "text"]), default="json", show_default=True,
              help="json: a JSON document; text: one plain line (for ntfy-style receivers).")
@click.option("--notify-header", "notify_headers", multiple=True, metavar="'NAME: VALUE'",
              help="A header sent with every notification, e.g. 'Authorization: Bearer TOKEN' (repeatable); "
                   "its value is never shown or stored.")
@click.option("--notify-header-env", "notify_header_envs", multiple=True, metavar="NAME=ENVVAR",
              help="A header whose value is read from the environment variable ENVVAR, e.g. "
                   "Authorization=NTFY_AUTH (repeatable): the secret stays off the command line.")
@json_option
def health(source_path: str | None, pipeline: str | None, notify_urls: tuple[str, ...], notify_format: str,
           notify_headers: tuple[str, ...], notify_header_envs: tuple[str, ...], as_json: bool) -> None:
    """Check freshness, lag, quarantine, dead letters and backups against the pipeline's limits.

    Prints one line per check: ok, warn or fail, the check's name, the reason and its
    numbers. Exit code 0 when no check fails (ok or warn), 1 when one does: cron,
    systemd and monitoring tools can act on it. The limits come from the pipeline file
    (freshness, max_lag, max_quarantined, max_quarantined_per_run, [queues."t:c"] max_dead
    and max_pending_age, [health] backups); with --source alone every stage's latest run
    and every queue's dead letter are checked. Each run leaves a row in the run log (kind
    health). With --notify a message goes out only when a state differs from the last one
    delivered; the URL's secrets never appear in output or in the ledger. --notify-header
    and --notify-header-env add headers to every notification (a webhook's token): their
    values never appear in output, errors, logs or the ledger (the run log keeps their names).

    --json prints {run_id, state, ok, checks: [{name, state, reason, numbers}], changed,
    notified, seconds}; each notified entry holds the redacted address, delivered,
    attempts and error.

    Example: minikafka health --pipeline conf/homelab.toml
    """
    from ..pipelines.health import check_health

    headers = {}
    if notify_headers or notify_header_envs:
        from ..connectors.notify import parse_notify_headers

        hint = "--notify-header" if notify_headers else "--notify-header-env"
        if not notify_urls:
            raise click.BadParameter("a header needs a --notify URL to go to", param_hint=hint)
        try:
            headers = parse_notify_headers(notify_headers, notify_header_envs)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=hint) from None
    path, defn = ledger_and_pipeline(source_path, pipeline)
    try:
        result = check_health(path, defn, notify_urls=notify_urls, notify_format=notify_format,
                              notify_headers=headers)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--notify") from None
    if as_json:
        echo_json(result.as_dict())
    else:
        for check in result.checks:
            click.echo(check.line())
        note(result.summary())
    if not result.ok:
        sys.exit(1)


@main.command()
@ledger_options
@click.option("--backfill", "backfill", multiple=True, metavar="PATH",
              help="Files (or directories) of the next backfill, for the disk-space check (repeatable).")
@click.option("--litestream", is_flag=True,
              help="Print a working litestream.yml for the ledger instead of the checks.")
@click.option("--replica", metavar="URL",
              help="With --litestream: where Litestream replicates to (a directory, file://, s3://...; "
                   "default: a directory beside the ledger).")
@json_option
def doctor(source_path: str | None, pipeline: str | None, backfill: tuple[str, ...], litestream: bool,
           replica: str | None, as_json: bool) -> None:
    """Check the set-up and say what to change, one line each.

    Checks the ledger's file system (never a network one), its journal (WAL, synchronous
    FULL), the -wal file's size and readers that pin it, free disk against the ledger and
    the next backfill (--backfill), Java, the SQLite JDBC jar, Spark, the staging location
    of a non-local master, and how old the newest snapshot in [health] backups is against
    the pipeline's freshness. Exit code 1 when a check fails.

    --litestream prints a litestream.yml replicating the ledger (to --replica); see
    docs/how-to/litestream.md. --json prints [{name, state, reason, numbers}].

    Example: minikafka doctor --pipeline conf/homelab.toml
    """
    from ..ledger.files import litestream_config
    from ..pipelines.doctor import doctor_checks

    path, defn = ledger_and_pipeline(source_path, pipeline, must_exist=False)
    if litestream:
        click.echo(litestream_config(path, replica), nl=False)
        return
    checks = doctor_checks(path, defn, backfill=backfill)
    if as_json:
        echo_json([c.as_dict() for c in checks])
    else:
        for check in checks:
            click.echo(check.line())
    if any(c.state == "fail" for c in checks):
        sys.exit(1)

"""The ``ui`` command: the local web console over a ledger (``minikafka.console``)."""

from __future__ import annotations

import click
from click.core import ParameterSource

from ..errors import MinikafkaError
from ..util.redact import redact_url
from .app import main
from .common import (
    SOURCE_HINT,
    DefinitionProblem,
    check_ledger_path,
    pipeline_hint,
    require_ledger,
    resolve_source_path,
)

TOKEN_ENV = "MINIKAFKA_UI_TOKEN"


@main.command()
@click.option("--source", "-s", "source_path", envvar="MINIKAFKA_SOURCE", metavar="FILE",
              help="The SQLite ledger file (default: $MINIKAFKA_SOURCE, or the --pipeline's source).")
@click.option("--pipeline", "-p", "pipelines", metavar="FILE", multiple=True,
              help="A pipeline file: its ledger, and its DAG drawn on the overview. Repeat for every "
                   "pipeline on the ledger.")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8787, show_default=True, type=click.IntRange(0, 65535),
              help="The TCP port (0: any free port; the URL printed says which).")
@click.option("--allow-actions", is_flag=True,
              help="Offer requeue, retry, cancel, pause/resume, replay and seek (each confirmed, each in the run log).")
@click.option("--allow-remote", is_flag=True,
              help="Allow a --host other machines can reach (needs --auth-token or --allowed-host).")
@click.option("--allowed-host", "allowed_hosts", metavar="NAME", multiple=True,
              help="A Host name the console answers to besides its address (repeat; e.g. the machine's DNS name).")
@click.option("--auth-token", envvar=TOKEN_ENV, metavar="TOKEN",
              help=f"Require this token on every request (default: ${TOKEN_ENV}); open URL?token=TOKEN once.")
def ui(source_path: str | None, pipelines: tuple[str, ...], host: str, port: int, allow_actions: bool,
       allow_remote: bool, allowed_hosts: tuple[str, ...], auth_token: str | None) -> None:
    """Serve a web console over the ledger: runs, topics, quarantine, queues, schedules, groups.

    Read-only unless --allow-actions; bound to 127.0.0.1 unless --host (another machine's
    reach needs --allow-remote with --auth-token or --allowed-host, and prints a warning).
    Prints the URL, then serves until SIGTERM (exit 0) or Ctrl-C (exit 130). Pages update by
    themselves when the ledger commits.

    Example: minikafka ui --source data/homelab.sqlite --port 8787
    """
    import os

    from ..console.server import is_loopback, serve, served_hosts

    ctx = click.get_current_context()
    if (auth_token is not None and not auth_token.strip()) or (auth_token is None and TOKEN_ENV in os.environ):
        where = "--auth-token" if ctx.get_parameter_source("auth_token") == ParameterSource.COMMANDLINE else f"${TOKEN_ENV}"
        raise click.UsageError(f"{where} is empty: an empty token would guard nothing; give a token, or unset it")
    explicit = source_path is not None and ctx.get_parameter_source("source_path") == ParameterSource.COMMANDLINE
    if pipelines:  # their DAGs are drawn whichever ledger is shown
        defns = [_load(p, source_path if explicit else None) for p in pipelines]
        path = str(defns[0].source)
        others = [str(d.path) for d in defns if str(d.source) != path]
        if others:
            raise click.UsageError(f"the pipelines name different ledgers ({path} first, then {', '.join(others)}): "
                                   "one console shows one ledger; pass --source to choose it")
        require_ledger(path, hint=SOURCE_HINT if explicit else pipeline_hint(defns[0]))
    else:
        defns, path = [], resolve_source_path(ctx, source_path, None)
        require_ledger(path)
    try:
        served_hosts(host, allow_remote=allow_remote, auth_token=auth_token, allowed_hosts=allowed_hosts)
    except MinikafkaError as exc:
        raise click.UsageError(str(exc)) from None
    if not is_loopback(host):
        unguarded = "" if auth_token else "; anyone who reaches it can read the ledger (set --auth-token)"
        click.echo(f"warning: the console listens on {host}, reachable from other machines{unguarded}", err=True)

    def ready(url: str) -> None:
        mode = "actions allowed" if allow_actions else "read-only"
        click.echo(f"minikafka console on {redact_url(url)} ({mode}; Ctrl-C stops)")

    serve(path, host=host, port=port, pipelines=defns, allow_actions=allow_actions, allow_remote=allow_remote,
          auth_token=auth_token, allowed_hosts=allowed_hosts, on_ready=ready)
    click.echo("console stopped")


def _load(pipeline: str, source_override: str | None):
    """The pipeline file without its quality suites (the console shows, it does not check)."""
    from pathlib import Path

    from ..pipelines.definition import load_pipeline

    check_ledger_path(source_override)
    try:
        defn = load_pipeline(pipeline, suites=False)
    except MinikafkaError as exc:
        raise DefinitionProblem(str(exc)) from exc
    if source_override:
        defn.source = Path(source_override).resolve()
    return defn

"""Long-running commands: watch (stages by trigger in one warm Spark app) and retention."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from .app import INTERRUPTED, main
from .common import (
    create_option,
    echo_json,
    ensure_pipeline_ledger,
    json_option,
    load_with_source,
    pipeline_argument,
    pipeline_source_option,
    remote_option,
    verbose_option,
    with_source,
)
from .output import note

if TYPE_CHECKING:  # the API is imported by the call that opens a Source, not by every command
    from ..api.source import Source


@main.command()
@pipeline_argument
@click.option("--until-idle", is_flag=True, help="Exit once no stage has work its trigger accepts (for cron, tests).")
@click.option("--master", help="Spark master URL (default: the pipeline's).")
@click.option("--poll", default=0.1, show_default=True, help="Seconds between looks at the ledger when idle.")
@remote_option("Run the stages on the engine at this URL (default: the pipeline's [engine] remote, else a "
               "Spark application of its own).")
@json_option
@verbose_option
@pipeline_source_option
@create_option
def watch(pipeline: str, until_idle: bool, master: str | None, poll: float, source_override: str | None,
          create_ledger: bool, as_json: bool, remote: str | None) -> None:
    """Keep one Spark application warm and run each stage when its trigger fires.

    Triggers per stage in the pipeline file: trigger = { rows = N } | { every = "5m" } |
    { every = "5m", fixed = true }; default: as soon as new rows are committed (debounced).
    One status line per run (stderr). SIGTERM finishes the run in flight and exits 0;
    Ctrl-C (SIGINT) too, exiting 130; a second Ctrl-C stops the run in flight at once
    (recorded as 'interrupted'). With --until-idle the exit code is 1 when a stage failed.

    --json prints one object at the end instead of the summary line: {pipeline, runs,
    failed, seconds, interrupted, outcomes: [{stage, status, run_id, seconds, rows_in,
    rows_out, rows_duplicate, rows_quarantined, rows_failed, error, ...}]} (the stage
    keys of 'run --json').

    Example: minikafka watch conf/homelab.toml --until-idle
    """
    from ..pipelines.watch import Watch

    defn = load_with_source(pipeline, source_override)
    ensure_pipeline_ledger(defn, create=create_ledger, parents=create_ledger, creates=True)
    result = Watch(defn, master=master, until_idle=until_idle, poll=poll, echo=note, remote=remote).run()
    runs = len(result.outcomes)
    if as_json:
        echo_json({"pipeline": defn.name, "runs": runs, "failed": len(result.failed),
                   "seconds": round(result.seconds, 3), "interrupted": result.interrupted,
                   "outcomes": [o.as_dict() for o in result.outcomes]})
    else:
        click.echo(f"watch {defn.name}: {runs} run(s), {len(result.failed)} failed, {result.seconds:.1f}s")
    if until_idle and not result.ok:
        sys.exit(1)
    if result.interrupted:
        sys.exit(INTERRUPTED)


@main.command()
@with_source
def retention(source: Source) -> None:
    """Delete rows every consumer has handled that are older than their topic's max age.

    A topic's max age is set with source.stream(name, max_age=...) or topic.set_retention(...).

    Example: minikafka retention --source data/homelab.sqlite
    """
    deleted = source.apply_retention()
    if not deleted:
        click.echo("no topic has a retention")
    for topic, n in deleted.items():
        click.echo(f"{topic}: {n} row(s) deleted")


__all__ = ["retention", "watch"]

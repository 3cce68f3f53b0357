"""The ``nightly`` command: cron's one line for any project (ingest, run, health, logs)."""

from __future__ import annotations

import sys

import click

from .app import main


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED, metavar="[RUN OPTIONS]...")
@click.option("--log-dir", metavar="DIR",
              help="Where the nightly-YYYY-MM-DD.log files and the lock live (default: logs/ beside PIPELINE).")
@click.option("--keep-logs", default=30, show_default=True, type=click.IntRange(min=1),
              help="Keep the newest N nightly logs, delete older ones.")
@click.option("--notify", "notify_urls", multiple=True, metavar="URL",
              help="Passed to 'minikafka health': POST there when a check's state changes (repeatable).")
def nightly(pipeline: str, run_args: tuple[str, ...], log_dir: str | None, keep_logs: int,
            notify_urls: tuple[str, ...]) -> None:
    """Ingest the night's files, run the pipeline, check its health, keep a log per night.

    \b
    1. each topic's 'ingest' globs (relative to PIPELINE; JSONL, CSV, Parquet):
       every file not ingested before, one transaction each (a file is known by
       its content's hash, noted in the ledger with its rows and a run row);
    2. minikafka run PIPELINE [RUN OPTIONS] (e.g. --strategy best_effort);
     then, when it declares [tables], minikafka compact of them (superseded
     versions every consumer has read);
    3. minikafka health --pipeline PIPELINE [--notify URL];
    4. every line also goes to DIR/nightly-YYYY-MM-DD.log; older logs beyond
       --keep-logs are deleted. Two nights never overlap (a lock in DIR).

    Ends with a summary line and leaves a run row of kind 'nightly'. Exit code 0 ok,
    1 a stage or an ingest failed, 2 a bad definition, 3 the run succeeded but a
    health check fails, 75 another nightly run holds the lock.

    Example: minikafka nightly conf/homelab.toml --log-dir data/logs
    """
    from pathlib import Path

    from ..errors import LockBusy
    from ..pipelines.nightly import BUSY, run_night

    folder = Path(log_dir) if log_dir else Path(pipeline).resolve().parent / "logs"
    try:
        night = run_night(pipeline, command=[sys.executable, "-m", "minikafka.cli"], log_dir=folder, keep_logs=keep_logs, run_args=run_args, notify=notify_urls,
                          echo=click.echo)
    except LockBusy:
        sys.exit(BUSY)
    if night.exit_code:
        sys.exit(night.exit_code)

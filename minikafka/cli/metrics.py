"""The ``metrics`` command: the ledger's figures in Prometheus' text format (``minikafka.observe``)."""

from __future__ import annotations

import click

from .app import main
from .health import ledger_and_pipeline, ledger_options
from .output import note


def scopes(defns) -> list:
    """The ``PipelineScope`` of each loaded pipeline file (its name and stages)."""
    from ..observe.scrape import PipelineScope

    return [PipelineScope(d.name, tuple(s.name for s in d.stages), d.health.backups) for d in defns if d is not None]


@main.command()
@ledger_options
@click.option("--textfile", "textfile", metavar="DIR", type=click.Path(file_okay=False),
              help="Write DIR/minikafka.prom atomically (for node_exporter's textfile collector) instead of printing.")
def metrics(source_path: str | None, pipeline: str | None, textfile: str | None) -> None:
    """Print the ledger's figures in Prometheus' text exposition format.

    Read from the ledger alone (a run that died shows at the next scrape): per stage its
    latest run (status, start, duration, rows in/out/duplicate/failed/quarantined) and when
    it last succeeded, failed and was interrupted; per topic its rows, newest row and
    quarantine; per consumer its lag; per work queue its jobs by state; the ledger's file
    and -wal sizes; the latest backup. With --pipeline its stages are labelled with its
    name and shown before their first run. Reads only: nothing is written to the ledger.
    --textfile DIR writes DIR/minikafka.prom through a temporary file renamed over it, so
    the collector never reads half a file (see docs/how-to/metrics.md for the cron line).

    Example: minikafka metrics --pipeline conf/homelab.toml
    """
    from ..observe.scrape import exposition, write_textfile

    path, defn = ledger_and_pipeline(source_path, pipeline)
    text = exposition(path, scopes([defn]))
    if textfile is None:
        click.echo(text, nl=False)
        return
    written = write_textfile(text, textfile)
    note(f"wrote {written}")

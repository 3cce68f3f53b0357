"""The warm engine: minikafka serve (and serve --stop)."""

from __future__ import annotations

import click

from ..util.redact import redact_url
from .app import main
from .common import load_with_source, pipeline_source_option, verbose_option
from .output import note


def _duration(value: str | None) -> float | None:
    if value is None:
        return None
    from ..util.duration import parse_duration

    try:
        return parse_duration(float(value) if value.replace(".", "", 1).isdigit() else value,
                              what="--idle-timeout", zero=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--idle-timeout") from exc


@main.command()
@click.option("--pipeline", "-p", "pipeline", metavar="FILE", type=click.Path(dir_okay=False),
              help="Take the engine's Spark settings (its [spark] table, master, [engine] port) from this "
                   "pipeline file, and record the engine beside its ledger so 'run' finds it.")
@click.option("--master", help="Spark master URL (default: the pipeline's, else local[*]).")
@click.option("--host", help="Address to listen on (default 127.0.0.1: a Connect server has no authentication).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default: [engine] port, else 15002; 0: any free port).")
@click.option("--idle-timeout", metavar="DURATION",
              help="Stop after this long without a stage (e.g. 10m); default: run until stopped.")
@click.option("--stop", "stop", is_flag=True, help="Stop the engine recorded for --pipeline instead of starting one.")
@click.option("--no-warm-up", "no_warm_up", is_flag=True,
              help="Say ready as soon as the engine answers, without first running a small stage's Spark work "
                   "(the first stages then pay it; 'run' starts its engine this way).")
@verbose_option
@pipeline_source_option
def serve(pipeline: str | None, master: str | None, host: str | None, port: int | None, idle_timeout: str | None,
          stop: bool, no_warm_up: bool, source_override: str | None) -> None:
    """Run a warm engine (a Spark Connect server) in the foreground, for run, check and watch.

    Prints one line when clients can use it ("engine ready at sc://..."), then runs until
    SIGTERM or Ctrl-C (or --idle-timeout), stopping Spark cleanly; exit code 0. A port
    already taken is one line naming it (exit 1). While it runs, 'minikafka run' of the
    same pipeline uses it (each stage a small client process), and 'serve --stop' stops it.

    Example: minikafka serve --pipeline conf/homelab.toml --port 0 --idle-timeout 10m
    """
    from ..pipelines.launch.engine import serve as serve_engine
    from ..pipelines.launch.engine import stop_engine

    defn = None
    if pipeline:
        defn = load_with_source(pipeline, source_override, suites=False)
    elif source_override:
        raise click.UsageError("--source needs --pipeline")
    if stop:
        url = stop_engine(defn)
        if url is None:
            note(f"no engine runs for {'pipeline ' + defn.name if defn else 'this directory'}")
        else:
            click.echo(f"stopped the engine at {redact_url(url)}")
        return
    serve_engine(defn, master=master, host=host, port=port, idle_timeout=_duration(idle_timeout) or None,
                 echo=click.echo, warm_up=not no_warm_up)

"""The warm engine: minikafka serve (and serve --stop), minikafka engine status|stop, and the
engine section of minikafka status."""

from __future__ import annotations

import click

from ..util.redact import redact_url
from .app import main
from .common import echo_json, json_option, load_with_source, pipeline_source_option, verbose_option
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
                   "pipeline file. Every pipeline of this user on the same master then uses the engine.")
@click.option("--master", help="Spark master URL (default: the pipeline's, else local[*]).")
@click.option("--host", help="Address to listen on (default 127.0.0.1: a Connect server has no authentication).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default: [engine] port, else 15002; 0: any free port).")
@click.option("--idle-timeout", metavar="DURATION",
              help="Stop after this long without a stage (e.g. 10m); default: run until stopped.")
@click.option("--stop", "stop", is_flag=True,
              help="Stop the engine --pipeline uses (on its master, or --master) instead of starting one.")
@click.option("--metrics-port", "metrics_port", type=click.IntRange(0, 65535), metavar="PORT",
              help="Also serve Prometheus text at http://HOST:PORT/metrics: the engine's own figures (up, start, "
                   "idle timeout, pipelines served, JVM memory) and, with --pipeline, its ledger's as 'minikafka "
                   "metrics' prints them (0: any free port, named in the ready line).")
@click.option("--no-warm-up", "no_warm_up", is_flag=True,
              help="Say ready as soon as the engine answers, without first running a small stage's Spark work "
                   "(the first stages then pay it; 'run' starts its engine this way).")
@verbose_option
@pipeline_source_option
def serve(pipeline: str | None, master: str | None, host: str | None, port: int | None, idle_timeout: str | None,
          stop: bool, no_warm_up: bool, metrics_port: int | None, source_override: str | None) -> None:
    """Run a warm engine (a Spark Connect server) in the foreground, for run, check and watch.

    Prints one line when clients can use it ("engine ready at sc://..."), then runs until
    SIGTERM or Ctrl-C (or --idle-timeout), stopping Spark cleanly; exit code 0. A port
    already taken is one line naming it (exit 1). While it runs, 'minikafka run' of any
    pipeline of this user on the same master uses it (each stage a small client process,
    a Spark Connect session of its own), and 'minikafka engine stop' stops it.

    With --metrics-port, Prometheus scrapes the engine at /metrics on that port.

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
        url = stop_engine(defn, master)
        if url is None:
            what = f"pipeline {defn.name}" if defn else f"master {redact_url(master or 'local[*]')}"
            note(f"no engine runs for {what}")
        else:
            click.echo(f"stopped the engine at {redact_url(url)}")
        return
    serve_engine(defn, master=master, host=host, port=port, idle_timeout=_duration(idle_timeout) or None,
                 echo=click.echo, warm_up=not no_warm_up, metrics_port=metrics_port)


def echo_engine_section(defn=None) -> None:
    """The engine part of ``minikafka status``: this user's running engines (up, master, the
    pipelines each served, its JVM's memory, idle for / stops in); with a pipeline and none
    running, the idle timeout an engine that pipeline's ``run`` starts would have. Nothing
    without a pipeline when no engine runs."""
    from ..util.enginedir import any_recorded, none_running_line

    default_timeout = defn.engine.idle_timeout if defn is not None else None
    where = str(defn.path) if defn is not None else None
    if not any_recorded():  # nothing to ask: said without importing Spark
        if defn is not None:
            click.echo("")
            click.echo(none_running_line(default_timeout, where))
        return
    from ..spark.engines import describe_lines, engines_now

    engines = engines_now()
    if not engines and defn is None:
        return
    click.echo("")
    for line in describe_lines(engines, default_timeout=default_timeout, where=where):
        click.echo(line)


@main.group()
def engine() -> None:
    """This user's warm engines: one per Spark master, shared by every pipeline on it.

    'minikafka run' starts one (or uses the running one) and it stops by itself once no run
    has used it for the idle timeout of the last run that did ([engine] idle_timeout, default
    10m, or run --idle-timeout).

    Example: minikafka engine status
    """


@engine.command("status")
@json_option
def engine_status(as_json: bool) -> None:
    """Show this user's running engines: URL, master, pid, the JVM's memory (RSS), the
    pipelines it served, how long it has been idle and when it stops.

    --json prints a list of {url, master, pid, jvm_pid, started_by, started_at, rss_bytes,
    pipelines: [{name, path, last_used}], idle_s, idle_timeout_s, stops_in_s, state_file,
    log} (idle_timeout_s and stops_in_s are null for an engine that runs until stopped).

    Example: minikafka engine status
    """
    from ..spark.engines import describe_lines, engines_now

    engines = engines_now()
    if as_json:
        echo_json(engines)
        return
    for line in describe_lines(engines):
        click.echo(line)


@engine.command("stop")
@click.option("--master", help="Only the engine of this master (default: every engine of this user).")
def engine_stop(master: str | None) -> None:
    """Stop this user's running engines now (each stops Spark cleanly); a run using one fails
    its running stages, which commit nothing.

    Example: minikafka engine stop
    """
    from ..pipelines.launch.engine import stop_engines

    urls = stop_engines(master)
    if not urls:
        note("no engine runs" + (f" on master {redact_url(master)}" if master else ""))
    for url in urls:
        click.echo(f"stopped the engine at {redact_url(url)}")

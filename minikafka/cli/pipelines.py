"""Commands over a pipeline file: run, check, plan, plot."""

from __future__ import annotations

import sys

import click

from ..errors import MinikafkaError
from ..util.redact import redact_url
from ..util.signals import sigterm_interrupts
from ..util.strategy import STRATEGIES
from .app import main
from .common import (
    DefinitionProblem,
    create_option,
    echo_json,
    engine_options,
    ensure_pipeline_ledger,
    json_option,
    load_with_source,
    open_ledger,
    pipeline_argument,
    pipeline_source_option,
    remote_option,
    stage_selection,
    verbose_option,
)
from .output import note, stage_running, warn


@main.command()
@pipeline_argument
@stage_selection
@click.option("--strategy", type=click.Choice(STRATEGIES), default="strict", show_default=True,
              help="strict: stop after a failed stage; best_effort: run every branch not downstream of a failure.")
@click.option("--dry-run", is_flag=True,
              help="Compute every stage and count what it would commit (duplicates, quarantine), writing nothing.")
@click.option("--in-process", is_flag=True, help="Run all stages in one Spark application (one JVM start).")
@click.option("--staging", help="Staging URI every node sees (file:///mnt/shared/mk, hdfs://..., s3a://...); "
              "default: the pipeline's [spark] staging. 'local' forces JDBC reads of the ledger.")
@engine_options
@click.option("--backup-before", metavar="DIR",
              help="Snapshot the ledger into DIR before the first stage starts (see 'minikafka backup').")
@click.option("--logical-date", metavar="YYYY-MM-DD",
              help="The night this run stands for, every stage's ctx.logical_date (default: the run's UTC start date).")
@json_option
@verbose_option
@pipeline_source_option
@create_option
def run(pipeline: str, master: str | None, stage: str | None, start: str | None, strategy: str,
        dry_run: bool, in_process: bool, source_override: str | None, staging: str | None,
        create_ledger: bool, as_json: bool, engine: str | None, remote: str | None, max_parallel: int | None,
        idle_timeout: str | None, backup_before: str | None, logical_date: str | None) -> None:
    """Run a pipeline's stages in DAG order, each as its own process, on a warm engine.

    Each stage is a small client of a warm engine (a Spark Connect server, see 'minikafka
    serve'): the pipeline's [engine] remote or --remote, else the engine running for this
    pipeline, else one this run starts and leaves up for --idle-timeout, so the next run
    starts at once. --engine submit runs one spark-submit per stage instead. Stages that
    do not depend on each other run side by side (--max-parallel); a DAG with nothing
    new starts no JVM.

    --logical-date YYYY-MM-DD says which night the run stands for (a re-run of last
    Tuesday, say): a transform that takes a context reads it as ctx.logical_date, and
    each stage's run row records it (details.logical_date).

    Prints a line as each stage ends, then a table (rows in, out, duplicates, quarantined, failed), then every
    expectation that failed under policy warn or quarantine (how many rows, samples, the
    report's path), failures, and "nothing to do" when no stage had new rows. A dry run
    says "dry run: nothing was written"; its counts are the real run's (the commit is
    rehearsed and rolled back).

    Exit code 0 when every stage succeeded, 1 when a stage failed, 2 for a bad
    definition or usage, 130 when stopped by Ctrl-C, 143 by SIGTERM (the stages in flight
    are recorded as 'interrupted' in the run log and commit nothing).

    On a non-local master (spark://, yarn, k8s://) the stages exchange data through a
    staging URI every node sees; the ledger never leaves this machine.

    A missing ledger is an error naming it (a typo in 'source =' never "succeeds" with
    0 rows); --create starts a new one, creating its directory.

    --json prints one object: {pipeline, ok, dry_run, nothing_to_do, seconds, stages:
    [{stage, status, run_id, seconds, rows_in, rows_out, rows_duplicate, rows_quarantined,
    rows_failed, rows_by_topic, error, quarantined_to, report, failed_expectations: [{suite,
    policy, expectation, column, unexpected_count, unexpected_percent, observed_value,
    unexpected_sample}]}]}; rows_by_topic is as in 'status --json'.

    Example: minikafka run conf/homelab.toml --strategy best_effort
    """
    from ..pipelines.definition import PipelineDefinitionError
    from ..pipelines.options import RunOptions
    from .engine import _duration

    try:
        options = RunOptions(master=master, strategy=strategy, stage=stage, start=start, dry_run=dry_run,
                             in_process=in_process, staging=staging, remote=remote, max_parallel=max_parallel,
                             idle_timeout=_duration(idle_timeout), backup_before=backup_before,
                             logical_date=logical_date, **({"engine": engine} if engine else {}))  # else the one default (RunOptions)
    except PipelineDefinitionError as exc:
        raise DefinitionProblem(str(exc)) from exc
    host = None  # stages on an engine fork from a stage host: started first, its imports overlap ours
    if options.engine != "submit" and not in_process:
        from ..pipelines.launch.stagehost import prestart_stage_host

        host = prestart_stage_host()
    from ..pipelines.runner import run_pipeline  # after the host started: this imports pyspark (0.2 s)
    try:
        defn = load_with_source(pipeline, source_override, suites=False)  # suites: once a stage has rows
        ensure_pipeline_ledger(defn, create=create_ledger, parents=create_ledger, creates=True)
        try:
            with sigterm_interrupts():  # cron's timeout, systemctl stop: recorded as Ctrl-C is (exit 143)
                result = run_pipeline(defn, options, echo=note, running=stage_running, stage_host=host)
        except PipelineDefinitionError as exc:
            raise DefinitionProblem(str(exc)) from exc
    finally:
        if host is not None:
            host.close()
    if as_json:
        echo_json(result.as_dict())
    else:
        click.echo(result.table())
    if not result.ok:
        sys.exit(1)


@main.command()
@pipeline_argument
@click.option("--stage", help="Check only this stage.")
@click.option("--master", help="Spark master URL.")
@remote_option("Run on the engine at this URL (default: the pipeline's [engine] remote, else a Spark "
               "application of its own).")
@json_option
@verbose_option
@pipeline_source_option
def check(pipeline: str, stage: str | None, master: str | None, source_override: str | None,
          as_json: bool, remote: str | None) -> None:
    """Validate what each stage with expectation suites would commit, committing nothing.

    Runs the stages in one Spark application (or as one client of the engine that --remote
    or the pipeline's [engine] remote names) in dry-run mode and prints every suite's
    results: per expectation its verdict, failing rows (count, share, samples) or observed
    value, and the path of the HTML report. With nothing pending it says so. Exit code 1
    when a check fails.

    --json prints one object: {pipeline, ok, nothing_pending, warnings, stages: [{stage, status,
    error, rows_in, rows_out, report, suites: [{suite, topic, policy, success,
    quarantined_rows, results: [{expectation, column, success, arguments, observed_value,
    element_count, unexpected_count, unexpected_percent, unexpected_sample}]}]}]}.

    Before the run it warns about designs that give wrong answers over nights: a stage that
    joins several plain inputs (use lookups), an aggregate written into a deduplicated topic
    (use a keyed table); --json lists them under "warnings" [{check, reason}].

    Example: minikafka check conf/homelab.toml --stage score
    """
    from ..pipelines.definition import PipelineDefinitionError
    from ..pipelines.design import design_warnings
    from ..pipelines.runner import run_pipeline
    from ..quality.report import describe

    defn = load_with_source(pipeline, source_override)
    try:
        defn.load_suites()  # great-expectations' own check of the arguments: exit 2 before Spark starts
    except MinikafkaError as exc:
        raise DefinitionProblem(str(exc)) from exc
    ensure_pipeline_ledger(defn)
    warnings = design_warnings(defn, stage)
    if not as_json:
        for found in warnings:
            warn(f"warning: {found.name}: {found.reason}")
    try:
        result = run_pipeline(defn, master=master, strategy="best_effort", stage=stage, dry_run=True,
                              in_process=True, echo=note, running=stage_running, remote=remote)
    except PipelineDefinitionError as exc:  # other errors (an unreachable master, no Java): exit 1, from main
        raise DefinitionProblem(str(exc)) from exc
    ok = result.ok and all(suite["success"] for o in result.outcomes for suite in o.quality.get("suites", []))
    pending = any((o.run or {}).get("rows_in") for o in result.outcomes)
    if as_json:
        echo_json({"pipeline": defn.name, "ok": ok, "nothing_pending": not pending,
                   "warnings": [{"check": w.name, "reason": w.reason} for w in warnings], "stages": [
            {"stage": o.name, "status": o.status, "error": o.error, "rows_in": (o.run or {}).get("rows_in", 0),
             "rows_out": (o.run or {}).get("rows_out", 0), "report": o.quality.get("report"),
             "suites": o.quality.get("suites", [])} for o in result.outcomes]})
        if not ok:
            sys.exit(1)
        return
    if not pending and ok:
        click.echo(f"nothing to check: no stage of {defn.name} has new rows"
                   + (f" (stage {stage})" if stage else "") + "; the suites run on what a stage would commit")
        return
    checked = False
    for outcome in result.outcomes:
        if outcome.status == "failed":
            click.echo(f"{outcome.name}: FAILED {outcome.error}")
        for suite in outcome.quality.get("suites", []):
            checked = True
            click.echo(f"{outcome.name}: suite {suite['suite']} ({suite['policy']}): "
                       f"{'passed' if suite['success'] else 'FAILED'}"
                       f" on {(outcome.run or {}).get('rows_out', 0)} row(s) it would commit")
            for r in suite["results"]:
                click.echo(f"    {'ok  ' if r['success'] else 'FAIL'} {r['expectation']}({r['column'] or ''}) "
                           f"{describe(r)}")
        if outcome.quality.get("report"):
            click.echo(f"    report: {outcome.quality['report']}")
    if not checked and ok:
        click.echo("no stage with expectation suites had rows to check" + (f" (stage {stage})" if stage else ""))
    if not ok:
        sys.exit(1)


@main.command()
@pipeline_argument
@stage_selection
@pipeline_source_option
def plan(pipeline: str, master: str | None, stage: str | None, start: str | None,
         source_override: str | None) -> None:
    """Print the exact commands of each stage, in the order run would use them, in both forms.

    First one spark-submit per stage (--engine submit), then each stage as a client of a
    warm engine (the default): the engine named by the pipeline or running for it, else
    sc://HOST:PORT. Lines starting with '#' say which is which.

    Example: minikafka plan conf/homelab.toml --from llm_summary
    """
    import shlex

    from ..pipelines.definition import select_stages
    from ..pipelines.launch.client import client_command
    from ..pipelines.launch.engine import find_engine
    from ..pipelines.launch.submit import submit_command
    from ..pipelines.retired import retired_messages

    defn = load_with_source(pipeline, source_override, suites=False)
    ensure_pipeline_ledger(defn)  # the commands would fail on a missing ledger (a typo in 'source =')
    try:
        chosen = select_stages(defn, stage=stage, start=start)
        click.echo("# one spark-submit per stage (run --engine submit)")
        for sd in chosen:
            click.echo(shlex.join(submit_command(defn, sd, master=master or defn.master, run_id=f"<{sd.name}-run-id>")))
        running = find_engine(defn)
        url = defn.engine.remote or (running.url if running else "sc://HOST:PORT")
        click.echo(f"# each stage a client of the warm engine at {redact_url(url)} (run; the project's code zipped as --py-files)")
        for sd in chosen:
            click.echo(shlex.join(client_command(defn, sd, url, f"<{sd.name}-run-id>", py_files="<code.zip>")))
    except MinikafkaError as exc:
        raise DefinitionProblem(str(exc)) from exc
    for line in retired_messages(defn):  # read-only: plan changes nothing
        click.echo(line, err=True)


@main.command()
@pipeline_argument
@click.option("--counts", is_flag=True, help="Label each topic with its new/handled counts (reads the ledger).")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE",
              help="Write the graph to FILE instead of printing Mermaid: .svg, .png or .pdf drawn by Graphviz's "
                   "dot, .dot DOT text, .mmd Mermaid text.")
@click.option("--no-stages", is_flag=True, help="Leave the stage names off the edges.")
@pipeline_source_option
def plot(pipeline: str, counts: bool, output: str | None, no_stages: bool, source_override: str | None) -> None:
    """Print the pipeline's topic graph as Mermaid, or draw it (SVG, PNG, PDF) with Graphviz.

    Topics are the nodes, each edge is labelled with the stage that reads one topic and
    writes the other. Topics whose names differ only in punctuation (a.b, a_b, a-b) are
    distinct nodes. Drawing needs Graphviz's 'dot' (Debian: apt-get install graphviz).

    Example: minikafka plot conf/homelab.toml --counts --output homelab.svg
    """
    from ..util.dotgraph import format_of, render_image, to_dot
    from ..util.mermaid import render

    defn = load_with_source(pipeline, source_override, check_jobs="source")  # no pyspark to draw a graph
    numbers = None
    if counts:
        ensure_pipeline_ledger(defn)
        with open_ledger(str(defn.source), read_only=True) as source:
            stored = set(source.topics())
            numbers = {}
            for name, t in defn.topics.items():
                if name not in stored:  # declared, not written yet
                    numbers[name] = (0, 0)
                    continue
                topic = source.topic(name, t.model, dedup=t.dedup or None)
                numbers[name] = (topic.count("new"), topic.count("handled"))
    edges = [(i, o) for s in defn.stages for i in s.inputs for o in s.outputs]
    stages = None if no_stages else [s.name for s in defn.stages for _i in s.inputs for _o in s.outputs]
    looked = defn.lookup_edges()  # lookups: dashed edges from the looked-up topic to the stage's outputs
    dashed = set(looked) - set(edges)
    edges += looked
    if stages is not None:
        stages += [s.name for s in defn.stages for _i in s.lookups for _o in s.outputs]
    if output is None or output == "-":
        click.echo(render(edges, numbers, stages, dashed))
        return
    from ..util.atomicfile import atomic_write

    fmt = format_of(output)
    if fmt == "mermaid":
        data = (render(edges, numbers, stages, dashed) + "\n").encode("utf-8")
    else:
        text = to_dot(edges, numbers, stages, title=defn.name, dashed=dashed)
        data = text.encode("utf-8") if fmt == "dot" else render_image(text, fmt)
    with atomic_write(output) as fh:
        fh.write(data)
    click.echo(f"plot: wrote {output} ({fmt}, {len(defn.topics)} topic(s), {len(defn.stages)} stage(s))")

"""The ``minikafka`` command: a thin skin over the library (one call per command)."""

from __future__ import annotations

import functools
import json
import sys

import click

from . import MinikafkaError, Source
from .layout import TopicLayout


def _row_json(row: tuple, decode) -> str:
    """One stored row as a JSON line: metadata first, then the fields."""
    meta = {"_id": row[0], "_created_at": row[1], "_status": row[2], "_parent_id": row[4]}
    return json.dumps({**meta, **decode(row)}, default=str, ensure_ascii=False)


def with_source(fn):
    """Shared --source option; library errors become clean CLI errors (exit 1)."""

    @click.option("--source", "-s", "source_path", default="data/homelab.sqlite", show_default=True,
                  help="The SQLite ledger file.")
    @functools.wraps(fn)
    def wrapper(source_path: str, **kwargs):
        try:
            with Source(source_path) as source:
                return fn(source, **kwargs)
        except MinikafkaError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper


@click.group()
@click.version_option(package_name="minikafka")
def main() -> None:
    """Typed, durable pipelines with one SQLite file as the state ledger."""


@main.command()
@with_source
def topics(source: Source) -> None:
    """List topics with their new/handled counts and consumers.

    Example: minikafka topics --source data/homelab.sqlite
    """
    conn = source._ledger.conn
    click.echo(f"{'topic':30} {'new':>10} {'handled':>10}  consumers")
    for name in source.topics():
        layout = source.layout(name)
        new, total = conn.execute(
            f"SELECT (SELECT count(*) FROM {layout.table} WHERE \"_status\" = 'new'), count(*) FROM {layout.table}"
        ).fetchone()
        consumers = [r[0] for r in conn.execute(
            "SELECT name FROM _minikafka_consumers WHERE topic = ? ORDER BY id", (name,))]
        click.echo(f"{name:30} {new:>10} {total - new:>10}  {', '.join(consumers)}")


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
    where = "1" if which == "all" else "\"_status\" = ?"
    params = () if which == "all" else (which,)
    decode = layout.decoder()
    rows = source._ledger.conn.execute(
        f"{layout.select_sql()} WHERE {where} ORDER BY \"_id\" LIMIT ?", (*params, limit)).fetchall()
    for row in rows:
        click.echo(_row_json(row, decode))


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
    from . import acks
    from .clock import utc_now

    source.layout(topic)
    lo, hi = from_id or 0, to_id if to_id is not None else 2**63 - 1
    if lo > hi:
        raise click.BadParameter("--from-id is greater than --to-id")
    with source._ledger.atomic() as conn:
        cid = acks.require_consumer(conn, topic, consumer)
        n = acks.replay_in_current_transaction(conn, topic, cid, lo, hi, utc_now())
    click.echo(f"{n} row(s) of {topic} pending again for consumer {consumer}")


class DefinitionProblem(click.ClickException):
    """A bad pipeline file or selection: exit code 2, like a usage error."""

    exit_code = 2


def _load(pipeline: str):
    from .pipelines.definition import load_pipeline

    try:
        return load_pipeline(pipeline)
    except MinikafkaError as exc:
        raise DefinitionProblem(str(exc)) from exc


def stage_selection(fn):
    """Options shared by run and plan."""
    fn = click.option("--from", "start", help="Run this stage and everything downstream of it.")(fn)
    fn = click.option("--stage", help="Run only this stage.")(fn)
    fn = click.option("--master", help="Spark master URL (default: the pipeline's, e.g. local[2]).")(fn)
    return fn


@main.command()
@click.argument("pipeline", type=click.Path(dir_okay=False))
@stage_selection
@click.option("--strategy", type=click.Choice(["strict", "best_effort"]), default="strict", show_default=True,
              help="strict: stop after a failed stage; best_effort: run every branch not downstream of a failure.")
@click.option("--dry-run", is_flag=True, help="Compute every stage but commit nothing.")
@click.option("--in-process", is_flag=True, help="Run all stages in one Spark application (one JVM start).")
def run(pipeline: str, master: str | None, stage: str | None, start: str | None, strategy: str,
        dry_run: bool, in_process: bool) -> None:
    """Run a pipeline's stages in DAG order, each as its own spark-submit.

    Exit code 0 when every stage succeeded, 1 when a stage failed, 2 for a bad
    definition or usage.

    Example: minikafka run conf/homelab.toml --strategy best_effort
    """
    from .pipelines.definition import PipelineDefinitionError
    from .pipelines.runner import run_pipeline

    defn = _load(pipeline)
    try:
        result = run_pipeline(defn, master=master, strategy=strategy, stage=stage, start=start, dry_run=dry_run,
                              in_process=in_process, echo=lambda m: click.echo(m, err=True))
    except PipelineDefinitionError as exc:
        raise DefinitionProblem(str(exc)) from exc
    except MinikafkaError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(result.table())
    if not result.ok:
        sys.exit(1)


@main.command()
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--stage", help="Check only this stage.")
@click.option("--master", help="Spark master URL.")
def check(pipeline: str, stage: str | None, master: str | None) -> None:
    """Validate what each stage with expectation suites would commit, committing nothing.

    Runs the stages in one Spark application in dry-run mode and prints every suite's
    results. Exit code 1 when a check fails.

    Example: minikafka check conf/homelab.toml --stage score
    """
    from .pipelines.runner import run_pipeline

    defn = _load(pipeline)
    try:
        result = run_pipeline(defn, master=master, strategy="best_effort", stage=stage, dry_run=True,
                              in_process=True, echo=lambda m: click.echo(m, err=True))
    except MinikafkaError as exc:
        raise DefinitionProblem(str(exc)) from exc
    ok = True
    for outcome in result.outcomes:
        quality = (outcome.run or {}).get("quality")
        if isinstance(quality, str):
            quality = json.loads(quality)
        if outcome.status == "failed":
            ok = False
            click.echo(f"{outcome.name}: FAILED {outcome.error}")
            continue
        for suite in (quality or {}).get("suites", []):
            ok = ok and suite["success"]
            click.echo(f"{outcome.name}: suite {suite['suite']} ({suite['policy']}): "
                       f"{'passed' if suite['success'] else 'FAILED'}")
            for r in suite["results"]:
                click.echo(f"    {'ok  ' if r['success'] else 'FAIL'} {r['expectation']}({r['column'] or ''}) "
                           f"unexpected={r['unexpected_count']} observed={r['observed_value']}")
    if not ok:
        sys.exit(1)


@main.command()
@click.argument("pipeline", type=click.Path(dir_okay=False))
@stage_selection
def plan(pipeline: str, master: str | None, stage: str | None, start: str | None) -> None:
    """Print the exact spark-submit commands, in the order run would use them.

    Example: minikafka plan conf/homelab.toml --from llm_summary
    """
    import shlex

    from .pipelines.runner import select_stages, submit_command

    defn = _load(pipeline)
    try:
        for sd in select_stages(defn, stage=stage, start=start):
            click.echo(shlex.join(submit_command(defn, sd, master=master or defn.master, run_id=f"<{sd.name}-run-id>")))
    except MinikafkaError as exc:
        raise DefinitionProblem(str(exc)) from exc


@main.command()
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--counts", is_flag=True, help="Label each topic with its new/handled counts.")
def plot(pipeline: str, counts: bool) -> None:
    """Print the pipeline's topic graph as Mermaid.

    Example: minikafka plot conf/homelab.toml --counts
    """
    from .mermaid import render

    defn = _load(pipeline)
    numbers = None
    if counts:
        from .pipelines.runner import open_source

        with open_source(defn) as source:
            numbers = {}
            for name in defn.topics:
                t = source._topics[name]
                numbers[name] = (t.count("new"), t.count("handled"))
    click.echo(render(defn.edges(), numbers))


@main.command()
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.argument("topic")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def ingest(pipeline: str, topic: str, path: str) -> None:
    """Append a JSONL file (or .jsonl.gz) to a topic, validating every line in Python.

    Invalid lines go to the quarantine with their line number; duplicates are skipped.

    Example: minikafka ingest conf/homelab.toml rss.items data/rss_dump.jsonl
    """
    from .ingest import ingest_jsonl
    from .pipelines.runner import open_source

    defn = _load(pipeline)
    if topic not in defn.topics:
        raise click.ClickException(f"topic {topic!r} is not declared in {pipeline}")
    try:
        with open_source(defn) as source:
            r = ingest_jsonl(source._topics[topic], path)
    except (MinikafkaError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{path}: {r.lines} lines, {r.appended} appended, {r.duplicates} duplicates, "
               f"{r.quarantined} quarantined")


@main.command()
@click.argument("topic")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl"]), required=True)
@click.option("--status", "which", type=click.Choice(["new", "handled", "all"]), default="all", show_default=True)
@with_source
def export(source: Source, topic: str, path: str, fmt: str, which: str) -> None:
    """Export a topic to Parquet or JSON lines, in pages of 50,000 rows.

    Example: minikafka export rss.scored --format parquet data/scored.parquet
    """
    from .export import rows_to_arrow

    layout = source.layout(topic)
    decode = layout.decoder()
    status = None if which == "all" else which
    where = "1" if status is None else "\"_status\" = ?"
    params = () if status is None else (status,)
    sql = f"{layout.select_sql()} WHERE {where} AND \"_id\" > ? ORDER BY \"_id\" LIMIT 50000"
    conn = source._ledger.conn
    last, written, writer = 0, 0, None
    with open(path, "w", encoding="utf-8") if fmt == "jsonl" else _nullcontext() as fh:
        while True:
            page = conn.execute(sql, (*params, last)).fetchall()
            if not page:
                break
            last = page[-1][0]
            written += len(page)
            if fmt == "jsonl":
                for row in page:
                    fh.write(_row_json(row, decode) + "\n")
            else:
                import pyarrow.parquet as pq

                table = rows_to_arrow(layout, page, decode)
                if writer is None:
                    writer = pq.ParquetWriter(path, table.schema)
                writer.write_table(table)
    if writer is not None:
        writer.close()
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(rows_to_arrow(layout, [], decode), path)
    click.echo(f"exported {written} row(s) of {topic} to {path}")


@main.command()
@click.argument("topic")
@click.argument("paths", nargs=-1, required=True)
@click.option("--model", help="module:Class of the topic's model (default: the one recorded in the ledger).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet"]), help="Default: from the file names.")
@click.option("--delimiter", default=",", show_default=True, help="CSV field delimiter.")
@click.option("--quote", default='"', show_default=True, help="CSV quote character.")
@click.option("--no-header", is_flag=True, help="CSV files have no header row.")
@click.option("--as-handled", is_flag=True, help="Load as already handled: history downstream stages skip.")
@click.option("--master", help="Spark master URL (default local[*]).")
@click.option("--batch-rows", default=50_000, show_default=True, help="Rows per commit transaction.")
@with_source
def backfill(source: Source, topic: str, paths: tuple[str, ...], model: str | None, fmt: str | None, delimiter: str,
             quote: str, no_header: bool, as_handled: bool, master: str | None, batch_rows: int) -> None:
    """Load historical dumps (JSONL, CSV, Parquet, gzip; files, directories, globs) into a topic.

    Bad rows go to the quarantine with file:line and the reason; duplicates are skipped;
    a killed run can be re-run and loads nothing twice.

    Example: minikafka backfill --source data/homelab.sqlite rss.items dumps/2025-*.jsonl.gz
    """
    import importlib

    from .spark.backfill import backfill as run_backfill
    from .spark.session import build_session

    model_cls = None
    if model:
        module_name, _, cls_name = model.partition(":")
        try:
            model_cls = getattr(importlib.import_module(module_name), cls_name)
        except (ImportError, AttributeError) as exc:
            raise DefinitionProblem(f"--model {model!r}: {exc}") from exc
    spark = build_session("minikafka:backfill", master)
    run_backfill(spark, source, topic, list(paths), model=model_cls, fmt=fmt, delimiter=delimiter, quote=quote,
                 header=not no_header, as_handled=as_handled, batch_rows=batch_rows,
                 progress=lambda m: click.echo(m, err=True))


def _nullcontext():
    import contextlib

    return contextlib.nullcontext()


if __name__ == "__main__":
    sys.exit(main())

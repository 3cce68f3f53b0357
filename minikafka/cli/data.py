"""Commands that move data in and out: ingest, export, backfill."""

from __future__ import annotations

import click

from ..api.source import Source
from ..errors import MinikafkaError
from .app import main
from .common import DefinitionProblem, _load, _nullcontext, _row_json, status_where, with_source


@main.command()
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.argument("topic")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def ingest(pipeline: str, topic: str, path: str) -> None:
    """Append a JSONL file (or .jsonl.gz) to a topic, validating every line in Python.

    Invalid lines go to the quarantine with their line number; duplicates are skipped.

    Example: minikafka ingest conf/homelab.toml rss.items data/rss_dump.jsonl
    """
    from ..api.ingest import ingest_jsonl
    from ..pipelines.runner import open_source

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
    from ..ledger.arrow import rows_to_arrow

    layout = source.layout(topic)
    decode = layout.decoder()
    where, params, fix = status_where(source, layout, which)
    sql = f"{layout.select_sql()} WHERE {where} AND \"_id\" > ? ORDER BY \"_id\" LIMIT 50000"
    conn = source._ledger.conn
    last, written, writer = 0, 0, None
    with open(path, "w", encoding="utf-8") if fmt == "jsonl" else _nullcontext() as fh:
        while True:
            page = [fix(row) for row in conn.execute(sql, (*params, last)).fetchall()]
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

    from ..spark.backfill import backfill as run_backfill
    from ..spark.session import build_session

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

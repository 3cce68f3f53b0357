"""Commands that read and fix the ledger: topics, status, show, schema, replay."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..ledger.consuming import COLUMNS as RUN_COLUMNS
from ..ledger.consuming import RowFilter, failed_run_ids, read_models, run_exists, run_ids_beginning
from ..ledger.topics import InvalidFilterError, TopicLayout, acks, catalog
from ..util.redact import redact_and_cut
from .app import main
from .common import echo_json, json_option, json_text, row_dict, with_source
from .output import note
from .tables import csv_lines, text_table

if TYPE_CHECKING:  # the API is imported by the call that opens a Source, not by every command
    from ..api.source import Source


def topic_summary(source: Source, name: str) -> dict:
    """The --json record of one topic (``read_models.TopicOverview.as_dict``: topic, new, handled,
    total, high_watermark, partitions, consumers, groups: [{name, partitions: [{partition, committed,
    lag}]}], quarantined), the one the console's topic pages read too."""
    return read_models.topic_overview(source.ledger.conn, source.layout(name)).as_dict()


@main.command()
@json_option
@with_source(read_only=True)
def topics(source: Source, as_json: bool) -> None:
    """List topics with their new/handled counts, consumers and quarantined rows, and each
    consumer (group) with its committed offset and lag per partition.

    --json prints a list of {topic, new, handled, total, high_watermark, consumers, quarantined,
    partitions, groups: [{name, partitions: [{partition, committed, lag}]}]}; a keyed table's
    record adds table: {key, merge, current, superseded} (its rows are versions).

    Example: minikafka topics --source data/homelab.sqlite --json
    """
    summaries = [topic_summary(source, name) for name in source.topics()]
    if as_json:
        echo_json(summaries)
        return
    click.echo(f"{'topic':30} {'new':>10} {'handled':>10} {'quar':>6} {'parts':>5}  consumers")
    for s in summaries:
        click.echo(f"{s['topic']:30} {s['new']:>10} {s['handled']:>10} {s['quarantined']:>6} {s['partitions']:>5}  "
                   f"{', '.join(s['consumers'])}")
        if "table" in s:  # a keyed table: its rows are versions
            t = s["table"]
            click.echo(f"    keyed table, key ({', '.join(t['key'])}): {t['current']} current row(s), "
                       f"{t['superseded']} superseded version(s) not compacted yet")
        for g in s["groups"]:
            parts = "  ".join(f"p{p['partition']}: committed {p['committed']} lag {p['lag']}" for p in g["partitions"])
            click.echo(f"    {g['name']:26} {parts}")


def read_runs_filtered(conn, *, stage: str | None, failed: bool, limit: int, fold: bool = True) -> list[dict]:
    """The runs ``status`` shows (``runview.folded_runs``: quiet runs of a stage folded unless
    ``fold`` is False), or the failed ones."""
    from ..ledger.consuming import read_runs, runview

    if not failed:  # health checks, every few minutes from cron, would crowd out the runs: --stage health
        return runview.folded_runs(conn, stage=stage, limit=limit, hide_kinds=("health",), fold=fold)
    ids = failed_run_ids(conn, stage=stage, limit=limit)
    return [{**read_runs(conn, run_id=i, limit=1)[0], "folded": None} for i in ids]


def status_record(run: dict) -> dict:
    """A run's ``status --json`` record: the run log's columns, ``rows_by_topic`` (None for a
    run that did not record them) and ``folded`` (None, or what the row stands for)."""
    from ..ledger.consuming import runview

    return {**{k: run[k] for k in RUN_COLUMNS}, "rows_by_topic": runview.rows_by_topic(run),
            "folded": run.get("folded")}


def resolve_run_id(conn, given: str, where) -> str:
    """The run id ``given`` names: itself, else the one run id it begins; an error (exit 1)
    when no run matches, or when several do (listing them)."""
    if run_exists(conn, given):
        return given
    matches = run_ids_beginning(conn, given)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise click.ClickException(f"no run {given!r} in {where} (nor any run id beginning with it)")
    shown = ", ".join(matches[:10]) + (f" and {len(matches) - 10} more" if len(matches) > 10 else "")
    raise click.ClickException(f"{given!r} begins {len(matches)} run ids in {where}: {shown}; give more of the id")


@main.command()
@click.option("--stage", help="Only this stage.")
@click.option("--run", "run_id", help="Only this run (its id as shown in the first column, or a unique prefix).")
@click.option("--failed", is_flag=True, help="Only runs that failed, were interrupted or left rows failed (status failed, interrupted, partial).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1),
              help="Rows to show (quiet runs folded into one row count as one).")
@click.option("--all", "show_all", is_flag=True,
              help="Every run on its own row: do not fold a stage's consecutive quiet runs.")
@json_option
@with_source(read_only=True)
def status(source: Source, stage: str | None, run_id: str | None, failed: bool, limit: int, show_all: bool,
           as_json: bool) -> None:
    """Show the last runs from the run log, most recent first, with their run ids.

    Health checks (minikafka health) are left out unless asked for with --stage health.
    Consecutive quiet runs of a stage (succeeded with nothing new: nothing read, written
    or set aside) are shown as one row, "quiet ×N since TIME" (--all shows each); the
    ledger keeps every run's row. A stage of several inputs or outputs gets a line of its
    counts per topic.

    --json prints a list of run records with the run log's columns as keys
    (run_id, kind, stage, consumer, inputs, outputs, watermarks, rows_*, status, error,
    started_at, finished_at, duration_s, quality, details), plus rows_by_topic
    ({inputs: {topic: {read, acked, failed, quarantined}}, outputs: {topic: {written,
    duplicate, quarantined}}}, null for a run that did not record them) and folded (null,
    or for a row standing for several quiet runs: {count, first_run_id, first_started_at,
    last_run_id, last_started_at}).

    Example: minikafka status --failed --stage llm_summary
    """
    from ..ledger.consuming import quarantine_topics, quarantined_everything, read_runs, runview
    from ..quality.report import describe

    conn = source.ledger.conn
    if run_id:
        runs = [{**r, "folded": None}
                for r in read_runs(conn, run_id=resolve_run_id(conn, run_id, source.path), limit=1)]
    else:
        runs = read_runs_filtered(conn, stage=stage, failed=failed, limit=limit, fold=not show_all)
    defn = click.get_current_context().meta.get("minikafka.pipeline")
    if defn is not None:  # --pipeline: name consumers no stage declares any more
        from ..pipelines.retired import retired_messages

        for line in retired_messages(defn, conn):
            click.echo(line, err=True)
    if as_json:
        echo_json([status_record(r) for r in runs])
        return
    width = max([len("run id"), *(len(run["run_id"]) for run in runs)])  # whole ids: they are pasted into --run
    click.echo(f"{'run id':{width}} {'started':27} {runview.table_heading()}")
    for run in runs:
        fold = run["folded"]
        shown = {**run, "stage": run["stage"] or run["kind"],
                 "status": f"quiet ×{fold['count']}" if fold else run["status"]}
        click.echo(f"{run['run_id']:{width}} {run['started_at']:27} {runview.table_cells(shown)}")
        if fold:
            click.echo(f"    quiet ×{fold['count']} since {fold['first_started_at']}: succeeded, nothing new to read "
                       "(status --all shows each run)")
        by_topic = runview.rows_by_topic(run)
        if by_topic and (len(by_topic.get("inputs") or {}) > 1 or len(by_topic.get("outputs") or {}) > 1):
            click.echo(f"    {runview.describe_by_topic(by_topic)}")
        if run["error"]:
            click.echo(f"    error: {redact_and_cut(run['error'], 300)}")
        if quarantined_everything(run):
            where = quarantine_topics(conn, run["run_id"]) or (run["inputs"] or ["TOPIC"])[:1]
            click.echo(f"    all {run['rows_in']} input row(s) went to the quarantine: "
                       f"minikafka quarantine {where[0]}")
        for suite in (run["quality"] or {}).get("suites", []):
            bad = [r for r in suite["results"] if not r["success"]]
            verdict = "passed" if suite["success"] else f"{len(bad)} of {len(suite['results'])} failed"
            click.echo(f"    quality {suite['suite']} ({suite['policy']}): {verdict}"
                       + (f", {suite['quarantined_rows']} row(s) quarantined" if suite["quarantined_rows"] else ""))
            for r in bad:
                click.echo(f"      - {r['expectation']}({r['column'] or ''}) {describe(r)}")
        if (run["quality"] or {}).get("report"):
            click.echo(f"    report: {run['quality']['report']}")
    if not runs:
        click.echo("no runs" + (" failed" if failed else "") + (f" for stage {stage!r}" if stage else ""), err=True)
    if not (run_id or failed or stage):  # the overview: the warm engine, its own section below the runs
        from .engine import echo_engine_section

        echo_engine_section(defn)


def _show_rows(source: Source, layout: TopicLayout, which: str, consumer: str | None,
               where: tuple[str, ...]) -> tuple[read_models.RowSelect, int | None]:
    """The rows ``show`` prints (with a status column for ``consumer``), and the consumer's id
    (None without --consumer)."""
    conn = source.ledger.conn
    cid = acks.require_consumer(conn, layout.name, consumer) if consumer else None
    rows = RowFilter(where, None if which == "all" else which, cid)
    try:
        return read_models.row_select(conn, layout, rows, status_for=() if cid is None else (cid,)), cid
    except InvalidFilterError as exc:
        raise click.BadParameter(str(exc), param_hint="--where") from exc


@main.command()
@click.argument("topic")
@click.option("--status", "which", type=click.Choice(["new", "handled", "all"]), default="all", show_default=True,
              help="Rows new or handled (for --consumer: pending or done for that consumer).")
@click.option("--consumer", help="Status as this consumer sees it; adds _consumer_status to each row.")
@click.option("--from-id", type=int, default=None, help="Start at this id (inclusive).")
@click.option("--where", "where", multiple=True, metavar="'FIELD OP VALUE'",
              help="Filter on a column, e.g. 'score>=0.5' or 'creator=alice'; OP is = != < <= > >= or ~ "
                   "(contains); 'FIELD = null' for missing values. Repeat to AND several.")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(min=0), help="Rows to print; 0 prints every matching row (a negative number is a usage error).")
@click.option("--follow", "-f", is_flag=True,
              help="Keep printing new matching rows as they commit (Ctrl-C stops). Without --from-id it starts "
                   "with the last --limit rows (--limit 0: every row).")
@click.option("--interval", default=0.5, show_default=True, type=click.FloatRange(min=0.01),
              help="With --follow: the longest wait between checks (a commit from any process wakes it at once).")
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header row instead of JSON lines.")
@click.option("--table", "as_table", is_flag=True, help="An aligned text table (long values cut) for reading.")
@with_source(read_only=True)
def show(source: Source, topic: str, which: str, consumer: str | None, from_id: int | None, where: tuple[str, ...],
         limit: int, follow: bool, interval: float, as_json: bool, as_csv: bool, as_table: bool) -> None:
    """Print a topic's rows as JSON lines (metadata first), oldest first.

    Each row has _id, _created_at, _status, _parent_id, then the model's fields (and
    _consumer_status with --consumer). --json prints one JSON array instead of lines,
    --csv CSV with a header row (nested values as JSON text), --table an aligned table.
    No matching row: "no rows" on stderr (stdout stays empty, or holds only the CSV
    header; --json prints []). Filters are checked against the topic's columns; values
    are never pasted into SQL.

    Example: minikafka show rss.items --consumer split_youtube --status new --where 'feed=lwn.net' --limit 5
    """
    layout: TopicLayout = source.layout(topic)
    shapes = [flag for flag, on in (("--json", as_json), ("--csv", as_csv), ("--table", as_table)) if on]
    if len(shapes) > 1:
        raise click.UsageError(f"choose one output shape: {' or '.join(shapes)}")
    if follow and (as_json or as_table):
        raise click.BadParameter(f"--follow prints rows as they come; it cannot be combined with {shapes[0]}",
                                 param_hint=shapes[0])
    selected, cid = _show_rows(source, layout, which, consumer, where)
    decode = layout.decoder()
    conn = source.ledger.conn
    n_cols = layout.partition_index + 1  # metadata, fields, _partition
    handled = acks.handled_positions(conn, layout.name)

    def render(row) -> dict:
        # rows committed by offset read as handled, as everywhere else
        row = (row[0], row[1], acks.status_of(row[2], row[0], row[n_cols - 1], handled), *row[3:])
        d = row_dict(row[:n_cols], decode)
        if cid is not None:
            d["_consumer_status"] = row[n_cols]
        return d

    if follow and from_id is None and limit:
        # like tail -f: the last --limit matching rows (--limit 0: all of them), then what commits next
        from_id = selected.nth_from_end(limit) or 0
    start = from_id if from_id is not None else 0

    def rows_after(after: int, most: int) -> list[tuple]:
        return selected.after(after, most)

    rows = rows_after(start - 1, -1 if (limit == 0 or follow) else limit)
    if not rows and not follow and not as_json:  # an empty JSON array says it already
        note("no rows" + (f" of {topic} match" if where or which != "all" or from_id is not None else f" in {topic}"))
    columns = ["_id", "_created_at", "_status", "_parent_id", *layout.field_names] + (["_consumer_status"] if cid else [])
    if as_json:
        echo_json([render(r) for r in rows])
        return
    if as_table:
        if rows:
            click.echo(text_table([render(r) for r in rows], columns))
        return
    line = (lambda d: next(csv_lines([d], columns, header=False)).rstrip("\r\n")) if as_csv else json_text
    if as_csv:
        click.echo(next(csv_lines([], columns)).rstrip("\r\n"))
    for row in rows:
        click.echo(line(render(row)))
    if not follow:
        return
    last = rows[-1][0] if rows else start - 1
    _follow(source, rows_after, last, interval, render, line)


def _follow(source: Source, rows_after, last: int, interval: float, render, line=json_text) -> None:
    """Print rows after ``last`` as they commit: the Source's watcher wakes this loop on any
    commit (from any process); ``interval`` caps how long one wait lasts."""
    watcher = source.watcher
    try:
        while True:
            mark = watcher.mark()
            for row in rows_after(last, -1):
                click.echo(line(render(row)))
                last = row[0]
            watcher.wait(mark, interval)
    except KeyboardInterrupt:
        return


@main.command()
@click.argument("topic")
@click.option("--sql", "as_sql", is_flag=True, help="Print the CREATE statements of the topic's table instead.")
@json_option
@with_source(read_only=True)
def schema(source: Source, topic: str, as_sql: bool, as_json: bool) -> None:
    """Show a topic's stored schema: model, dedup fields, and one line per column.

    --json prints {topic, model, dedup, created_at, columns: [{name, kind, sql_type,
    nullable, enum_values, max_digits, decimal_places}], json_schema}.

    Example: minikafka schema rss.items --json
    """
    from ..ledger.topics import stored_model_path

    conn = source.ledger.conn
    layout = source.layout(topic)
    if as_sql:
        for sql in catalog.table_sql(conn, layout.name):
            click.echo(sql + ";")
        return
    created = catalog.created_at(conn, layout.name)
    columns = []
    for c in layout.columns:
        d = c.describe()
        columns.append({k: d.get(k) for k in ("name", "kind", "sql_type", "nullable", "enum_values", "max_digits",
                                               "decimal_places")})
    info = {"topic": layout.name, "model": stored_model_path(conn, layout.name), "dedup": list(layout.dedup),
            "created_at": created, "columns": columns, "json_schema": layout.json_schema}
    if as_json:
        echo_json(info)
        return
    click.echo(f"topic {info['topic']}  model {info['model']}  created {created}")
    click.echo(f"dedup: {', '.join(layout.dedup) or '(none)'}")
    click.echo(f"{'column':28} {'kind':10} {'sqlite':8} {'null':5} notes")
    for c in columns:
        notes = []
        if c["name"] in layout.dedup:
            notes.append("dedup")
        if c["enum_values"]:
            notes.append("one of " + ", ".join(map(str, c["enum_values"])))
        if c["max_digits"] is not None or c["decimal_places"] is not None:
            notes.append(f"digits={c['max_digits']} places={c['decimal_places']}")
        click.echo(f"{c['name']:28} {c['kind']:10} {c['sql_type']:8} {'yes' if c['nullable'] else 'no':5} "
                   f"{'; '.join(notes)}")


@main.command()
@click.argument("topic")
@click.option("--consumer", required=True, help="The consumer whose acks are reset.")
@click.option("--from-id", type=int, default=None)
@click.option("--to-id", type=int, default=None)
@with_source
def replay(source: Source, topic: str, consumer: str, from_id: int | None, to_id: int | None) -> None:
    """Make a range of rows pending again for one consumer.

    Example: minikafka replay rss.items --consumer split_youtube --from-id 1 --to-id 20
    """
    from ..util.clock import utc_now

    source.layout(topic)
    lo, hi = from_id or 0, to_id if to_id is not None else 2**63 - 1
    if lo > hi:
        raise click.BadParameter("--from-id is greater than --to-id")
    with source.ledger.atomic() as conn:
        cid = acks.require_consumer(conn, topic, consumer)
        n = acks.replay_in_current_transaction(conn, topic, cid, lo, hi, utc_now())
    click.echo(f"{n} row(s) of {topic} pending again for consumer {consumer}")

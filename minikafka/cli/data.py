"""Commands that move data in and out: ingest, export, backfill."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from ..errors import InputFileError, MinikafkaError
from ..util.dumpfiles import DUMP_FORMATS
from ..util.dumpsize import ENGINES
from ..util.redact import redact_url
from ..util.signals import sigterm_interrupts
from .app import main
from .common import (
    CREATE_HINT,
    SOURCE_HINT,
    _row_json,
    create_option,
    echo_json,
    ensure_pipeline_ledger,
    json_option,
    load_with_source,
    log,
    open_ledger,
    pipeline_model,
    remote_option,
    row_dict,
    status_fixer,
    verbose_option,
    with_source,
)
from .output import note, progress, stage_running

if TYPE_CHECKING:  # the API is imported by the call that opens a Source, not by every command
    from ..api.source import Source


def import_model(spec: str):
    """``module:Class`` -> the pydantic model class; a usage error (exit 2) when it cannot be imported."""
    import importlib

    from pydantic import BaseModel

    module_name, _, cls_name = spec.partition(":")
    if not module_name or not cls_name:
        raise click.BadParameter(f"{spec!r}: write module:Class, e.g. schemas.homelab:RssItem", param_hint="--model")
    try:
        model = importlib.import_module(module_name)
        for part in cls_name.split("."):
            model = getattr(model, part)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"{spec!r}: {exc}", param_hint="--model") from exc
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise click.BadParameter(f"{spec!r} is not a pydantic model", param_hint="--model")
    return model


def _spool_stdin(tmpdir: str) -> str:
    """Copy standard input to a file named ``<stdin>`` (quarantine origins read ``<stdin>:LINE``)."""
    import shutil
    import sys
    from pathlib import Path

    path = Path(tmpdir) / "<stdin>"
    log.debug("reading standard input into %s", path)
    with open(path, "wb") as fh:
        shutil.copyfileobj(sys.stdin.buffer, fh, 1 << 20)
    return str(path)


@main.command()
@click.argument("args", nargs=-1, metavar="[PIPELINE] TOPIC PATH")
@click.option("--pipeline", "-p", "pipeline_opt", metavar="FILE", help="The pipeline file declaring TOPIC.")
@click.option("--source", "-s", "source_path", envvar="MINIKAFKA_SOURCE", metavar="FILE",
              help="Ingest into this ledger (default: $MINIKAFKA_SOURCE) with --model and no pipeline file; "
                   "with a pipeline, instead of its 'source ='.")
@click.option("--model", metavar="module:Class",
              help="With --source: the topic's model (default: the one recorded in the ledger for TOPIC).")
@click.option("--dedup", multiple=True, metavar="FIELD", help="With --source, for a new topic: its dedup field(s).")
@create_option
@json_option
def ingest(args: tuple[str, ...], pipeline_opt: str | None, source_path: str | None, model: str | None,
           dedup: tuple[str, ...], create_ledger: bool, as_json: bool) -> None:
    """Append a JSONL, CSV or Parquet file (gzip too; '-': JSONL on standard input) to a topic, no JVM.

    The format comes from the name (.jsonl .ndjson .json, .csv .tsv, .parquet; JSONL when
    it tells none). CSV has a header row; its text values are typed by the model (an empty
    field is null where the model allows it). Invalid rows go to the quarantine with
    file:line and the reason; duplicates are skipped. A field the model lacks follows the
    topic's unknown_fields in the pipeline file: dropped with a warning and a count in the
    summary (the default), quarantined, or kept (evolve). The file is one transaction:
    Ctrl-C (exit 130) stores nothing of it. Exit
    code 1 when no line could be stored.

    --json prints one object: {topic, file, lines, appended, duplicates, quarantined,
    already_quarantined, blank} (lines = the other five summed).

    \b
    minikafka ingest PIPELINE TOPIC PATH          the topic as the pipeline declares it
    minikafka ingest --pipeline FILE TOPIC PATH   the same
    minikafka ingest --source FILE --model module:Class TOPIC PATH
                                                  no pipeline file (the topic is created if new)

    The first ingest into a pipeline's 'source =' creates that ledger (and its missing
    directories); any other missing ledger is an error unless --create is given.

    Example: cat examples/feed.jsonl | minikafka ingest --source data/homelab.sqlite --model schemas.homelab:RssItem rss.items -
    """
    import tempfile

    from ..connectors.ingest import ingest_file
    from ..pipelines.opening import open_source

    ctx = click.get_current_context()
    explicit_source = source_path and ctx.get_parameter_source("source_path").name == "COMMANDLINE"
    if len(args) == 3:
        if pipeline_opt:
            raise click.UsageError("give the pipeline once: as PIPELINE or as --pipeline")
        pipeline, topic, path = args
    elif len(args) == 2:
        pipeline, (topic, path) = pipeline_opt, args
    else:
        raise click.UsageError("expected [PIPELINE] TOPIC PATH")
    if not pipeline and not source_path:
        raise click.UsageError("which ledger? pass PIPELINE, --pipeline FILE, or --source FILE with --model")
    if model and pipeline:
        raise click.UsageError("--model goes with --source; a pipeline file names its topics' models")
    if path != "-":
        from pathlib import Path

        if not Path(path).is_file():
            raise click.BadParameter(f"no file {path!r}", param_hint="PATH")
    shown = "<stdin>" if path == "-" else path
    with tempfile.TemporaryDirectory(prefix="minikafka-stdin-") as tmpdir:
        if path == "-":
            path = _spool_stdin(tmpdir)
        try:
            if pipeline:
                # only the topics' models: the job modules belong to run, plan and check
                defn = load_with_source(pipeline, source_path if explicit_source else None, check_jobs=False)
                if topic not in defn.topics:
                    raise click.ClickException(f"topic {topic!r} is not declared in {pipeline}")
                # the declared pipeline's own ledger may start here; an override only with --create
                ensure_pipeline_ledger(defn, create=create_ledger or not explicit_source, parents=create_ledger,
                                       creates=True)
                notes: list[str] = []
                with open_source(defn, notes=notes) as source, stage_running(f"ingest {shown}"):
                    for line in notes:  # a stage registered here that starts past rows that exist
                        note(line)
                    r = ingest_file(source.opened(topic), path, fmt="jsonl" if shown == "<stdin>" else None)
            else:
                with open_ledger(source_path, create=create_ledger, parents=create_ledger,
                                 hint=SOURCE_HINT + CREATE_HINT) as source, stage_running(f"ingest {shown}"):
                    r = ingest_file(_open_topic(source, topic, model, dedup), path,
                                    fmt="jsonl" if shown == "<stdin>" else None)
        except InputFileError as exc:
            # the spooled copy of standard input is named as the user knows it
            message = str(exc).replace(str(path), shown, 1)
            raise click.ClickException(f"{message}; nothing was stored") from exc
        except (MinikafkaError, OSError) as exc:
            raise click.ClickException(str(exc)) from exc
    if as_json:
        echo_json({"topic": topic, "file": shown, "lines": r.lines, "appended": r.appended,
                   "duplicates": r.duplicates, "quarantined": r.quarantined,
                   "already_quarantined": r.already_quarantined, "blank": r.blank})
    else:
        click.echo(r.summary(shown))
    if r.rows and not (r.appended or r.duplicates):
        raise click.ClickException(
            f"no line of {shown} could be stored: every one of its {r.rows} line(s) is in the quarantine "
            f"({r.quarantined} new, {r.already_quarantined} already there); see 'minikafka quarantine {topic}'")


def _open_topic(source: Source, topic: str, model: str | None, dedup: tuple[str, ...]):
    from ..errors import TopicNotFoundError

    try:
        layout = source.layout(topic)
    except TopicNotFoundError:
        layout = None
    if layout is None:
        if not model:
            raise click.UsageError(f"topic {topic!r} is new: pass --model module:Class (and --dedup FIELD)")
        return source.topic(topic, import_model(model), dedup=dedup or None)
    if dedup and tuple(dedup) != layout.dedup:
        raise click.BadParameter(f"topic {topic!r} exists with dedup {layout.dedup!r}", param_hint="--dedup")
    cls = import_model(model) if model else source.model_of(topic)
    return source.topic(topic, cls, dedup=layout.dedup or None)


EXPORT_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl",
                  ".json": "json", ".csv": "csv"}


def export_format(path: str, fmt: str | None) -> str:
    """--format, else the format PATH's suffix names; a usage error when neither tells."""
    if fmt:
        return fmt
    from pathlib import Path

    suffix = Path(path).suffix.lower()
    if suffix in EXPORT_FORMATS:
        return EXPORT_FORMATS[suffix]
    known = ", ".join(EXPORT_FORMATS)
    what = "standard output" if path == "-" else f"{path!r} (suffix {suffix or 'none'})"
    raise click.UsageError(f"which format? --format is needed for {what}; suffixes that tell it: {known}")


@main.command()
@click.argument("topic")
@click.argument("path", type=click.Path(allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl", "json", "csv"]),
              help="Default: from PATH's suffix (.parquet .pq, .jsonl .ndjson, .json, .csv).")
@click.option("--status", "which", type=click.Choice(["new", "handled", "all"]), default=None,
              help="Only rows of this status (default: all).")
@click.option("--where", "where", multiple=True, metavar="'FIELD OP VALUE'",
              help="Only rows matching, as in 'show --where' ('score>=0.5', 'feed=hn', 'lang = null'); "
                   "repeat to AND several. Values are parameters, never SQL.")
@click.option("--incremental", is_flag=True,
              help="PATH is a directory of Parquet files that holds the topic's rows, each exported once: write "
                   "only the rows above what it holds, and record the new last id in the ledger.")
@click.option("--partition-by", "partition_by", multiple=True, metavar="FIELD",
              help="With --incremental: hive-style partition directories (FIELD=value/); repeat for several.")
@click.option("--name", "target_name", metavar="NAME",
              help="With --incremental: the export's name in the ledger (default: the topic's name, with _ for . and -).")
@with_source(read_only=lambda kw: not kw.get("incremental"))
def export(source: Source, topic: str, path: str, fmt: str | None, which: str | None, where: tuple[str, ...],
           incremental: bool, partition_by: tuple[str, ...], target_name: str | None) -> None:
    """Export a topic to Parquet, JSON lines, a JSON array or CSV, in pages of 50,000 rows.

    The format comes from PATH's suffix (x.parquet, x.jsonl, x.json, x.csv) unless
    --format names it. Rows carry _id, _created_at, _status, _parent_id, then the
    model's fields; in CSV nested values are JSON text.

    The file appears complete or not at all (written beside it, fsynced, renamed); a
    missing directory or a full disk is an error naming the file. PATH '-' (or
    /dev/stdout) writes to standard output, the summary then going to stderr; a symbolic
    link's target is replaced (the link stays); a named pipe or a device such as
    /dev/null is written directly; a directory or a socket is refused.

    --incremental keeps PATH, a directory, as a Parquet export of the topic recorded in
    the ledger (a lake target of format parquet, see 'minikafka lake list'): each run
    writes only the rows new since the last one, in files named by their id range, and
    records how far it got in one transaction with a run row; a run that died leaves
    files the next one deletes first. Stage commits that write the topic keep it up to
    date too.

    Example: minikafka export rss.scored data/scored.csv --where 'score>=0.5' --source data/homelab.sqlite
    """
    import contextlib
    import sys

    from ..util.atomicfile import atomic_write

    layout = source.layout(topic)  # no such topic: nothing opened, nothing written
    if incremental:
        _export_incremental(source, topic, path, fmt, which, where, partition_by, target_name)
        return
    if partition_by or target_name:
        raise click.UsageError("--partition-by and --name describe an incremental export: add --incremental")
    if os.path.isdir(path):
        raise click.BadParameter(f"{path!r} is a directory: give a file, or --incremental to keep a directory "
                                 "of Parquet files", param_hint="PATH")
    fmt = export_format(path, fmt)
    rows = _rows(layout, which, where)
    to_stdout = path == "-" or _is_standard_output(path)
    if to_stdout:
        if fmt == "parquet" and sys.stdout.isatty():
            raise click.BadParameter("Parquet is binary: redirect standard output to a file or a pipe",
                                     param_hint="PATH")
        out = contextlib.nullcontext(sys.stdout.buffer)
    else:
        out = atomic_write(path)
    with out as fh:
        written = _write_export(source, layout, fmt, fh, rows)
        fh.flush()
    click.echo(f"exported {written} row(s) of {topic} to {'standard output' if path == '-' else path}",
               err=to_stdout)


def _export_incremental(source: Source, topic: str, path: str, fmt: str | None, which: str | None,
                        where: tuple[str, ...], partition_by: tuple[str, ...], target_name: str | None) -> None:
    """``export --incremental``: declare (or find) the Parquet export of ``topic`` at ``path``, then bring it up to
    the topic in one transaction with a run row."""
    import re

    from ..errors import LakeConfigError, LakeError
    from ..ledger.lake import ParquetTarget, declare, read_target, sync

    if fmt not in (None, "parquet"):
        raise click.UsageError(f"--incremental writes Parquet files, not {fmt}")
    if where or which:
        raise click.UsageError("--incremental exports every row of the topic once: --where and --status do not apply")
    if path == "-":
        raise click.BadParameter("--incremental needs a directory, not standard output", param_hint="PATH")
    name = target_name or re.sub(r"[^A-Za-z0-9_]", "_", topic)
    try:
        target = ParquetTarget(name, topic, path, partition_by=partition_by)
        stored = read_target(source.ledger.conn, name)
        if stored is not None and (stored.format, stored.topic, stored.location) != ("parquet", topic,
                                                                                     target.location):
            raise click.UsageError(f"the ledger's export {name!r} is the {stored.format} target of {stored.topic} at "
                                   f"{stored.location}: give this one another name with --name")
        declare(source.ledger, [target])
        result = sync(source.ledger, target)
    except (LakeConfigError, LakeError) as exc:
        raise click.ClickException(str(exc)) from exc
    parts = f" (partitioned by {', '.join(partition_by)})" if partition_by else ""
    what = f"{result.rows} new row(s)" if result.rows else "nothing new"
    click.echo(f"exported {what} of {topic} to {target.location}{parts}; the export holds the topic up to id "
               f"{result.last_id}")


def _rows(layout, which: str | None, where: tuple[str, ...]):
    """The rows to export (``--status``, the --where filters as ``show`` parses them), checked."""
    from ..ledger.consuming import RowFilter
    from ..ledger.topics import InvalidFilterError

    rows = RowFilter(where, None if which in (None, "all") else which)
    try:
        rows.condition(layout)
    except InvalidFilterError as exc:
        raise click.BadParameter(str(exc), param_hint="--where") from exc
    return rows


def _is_standard_output(path: str) -> bool:
    """``path`` is what standard output already writes to (``/dev/stdout``, a link to it, or
    the file it was redirected to): written through standard output, so ``>>`` appends."""
    import sys

    from ..util.atomicfile import same_file

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # captured output (a test runner)
        return False
    return same_file(path, fd)


EXPORT_PAGE = 50_000


def _write_export(source: Source, layout, fmt: str, fh, rows) -> int:
    """Write the topic's rows ``rows`` (a ``RowFilter``) picks to the binary file ``fh`` page by page;
    the row count."""
    from ..ledger.consuming import read_models
    from ..ledger.topics import rows_to_arrow
    from .output import progress
    from .tables import csv_lines

    decode = layout.decoder()
    fix = status_fixer(source, layout)
    pages = read_models.row_select(source.ledger.conn, layout, rows).scan(EXPORT_PAGE)
    columns = ["_id", "_created_at", "_status", "_parent_id", *layout.field_names]
    written, writer = 0, None
    if fmt == "csv":
        fh.write(next(csv_lines([], columns)).encode("utf-8"))
    elif fmt == "json":
        fh.write(b"[")
    try:
        with progress(f"export {layout.name}") as shown:
            for rows in pages:
                page = [fix(row) for row in rows]
                written += len(page)
                if written > len(page) or len(page) == EXPORT_PAGE:
                    shown.update(f"{written} row(s) written", completed=written)
                if fmt == "jsonl":
                    fh.write("".join(_row_json(row, decode) + "\n" for row in page).encode("utf-8"))
                elif fmt == "json":
                    first = written == len(page)
                    fh.write(("" if first else ",").encode("utf-8")
                             + ",".join("\n" + _row_json(row, decode) for row in page).encode("utf-8"))
                elif fmt == "csv":
                    fh.write("".join(csv_lines((row_dict(row, decode) for row in page), columns,
                                               header=False)).encode("utf-8"))
                else:
                    import pyarrow.parquet as pq

                    table = rows_to_arrow(layout, page, decode)
                    if writer is None:
                        writer = pq.ParquetWriter(fh, table.schema)
                    writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    if fmt == "json":
        fh.write(b"\n]\n" if written else b"]\n")
    if writer is None and fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(rows_to_arrow(layout, [], decode), fh)
    return written


def _one_character(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if len(value) != 1:
        raise click.BadParameter(f"must be one character, got {value!r}")
    return value


@main.command()
@click.argument("topic")
@click.argument("paths", nargs=-1, required=True)
@click.option("--model", help="module:Class of the topic's model (default: the one recorded in the ledger).")
@click.option("--format", "fmt", type=click.Choice(list(DUMP_FORMATS)), help="Default: from the file names.")
@click.option("--delimiter", default=",", show_default=True, callback=_one_character, help="CSV field delimiter.")
@click.option("--quote", default='"', show_default=True, callback=_one_character, help="CSV quote character.")
@click.option("--no-header", is_flag=True,
              help="CSV files have no header row: the columns are the model's fields, in order.")
@click.option("--as-handled", is_flag=True, help="Load as already handled: history downstream stages skip.")
@click.option("--engine", type=click.Choice(ENGINES), default="auto", show_default=True,
              help="python: check and load the rows in this process, no JVM; spark: with Spark (local, --master or "
                   "--remote); auto: python for a small dump (at most 50,000 rows in all) or one with nothing new, "
                   "else spark.")
@click.option("--master", help="Spark master URL (default local[*]).")
@click.option("--batch-rows", default=50_000, show_default=True, type=click.IntRange(min=1),
              help="Rows per commit transaction (at least 1).")
@click.option("--staging", help="Staging URI every node sees (needed with a non-local --master).")
@remote_option("Load on the warm engine at this URL (see 'minikafka serve') instead of starting a JVM; "
               "the engine must run on this machine (it reads the dump files).")
@json_option
@verbose_option
@with_source(creates=True)
def backfill(source: Source, topic: str, paths: tuple[str, ...], model: str | None, fmt: str | None, delimiter: str,
             quote: str, no_header: bool, as_handled: bool, engine: str, master: str | None, batch_rows: int,
             staging: str | None, remote: str | None, as_json: bool) -> None:
    """Load historical dumps (JSONL, CSV, Parquet, gzip; files, directories, globs) into a topic.

    Bad rows go to the quarantine with file:line and the reason; duplicates are skipped;
    a killed run can be re-run and loads nothing twice. Options, files and the topic are
    checked before Spark starts. Progress goes to stderr; Ctrl-C stops after the batch
    being committed (exit 130, the run recorded as 'interrupted'; a re-run goes on);
    SIGTERM does the same with exit 143.

    A small dump (at most 50,000 rows in all) and one whose files were all loaded before
    load without a JVM (--engine auto, the default): the same checks run in this process,
    with the same results. --engine spark always starts Spark, --engine python never does.

    --json prints one object: {topic, run_id, status, files, skipped_files, rows_read,
    rows_loaded, rows_duplicate, rows_quarantined, seconds}.

    Example: minikafka backfill --source data/homelab.sqlite rss.items 'examples/dumps/*.jsonl.gz'
    """
    from ..spark.loading.backfill import check_staging, detect_format, discover

    ctx = click.get_current_context()
    if delimiter == quote:
        raise click.BadParameter(f"the delimiter and the quote character are both {quote!r}", param_hint="--quote")
    if remote and master:
        raise click.BadParameter("the engine at --remote has its own master: give one of the two", param_hint="--master")
    if engine == "python":
        for value, flag in ((remote, "--remote"), (master, "--master"), (staging, "--staging")):
            if value:
                raise click.BadParameter(f"{flag} is for Spark; --engine python loads in this process",
                                         param_hint="--engine")
    if remote:
        from ..spark.engine import parse_remote

        try:
            parse_remote(remote)  # a malformed URL: exit 2 before anything starts
        except MinikafkaError as exc:
            raise click.BadParameter(str(exc), param_hint="--remote") from None
    if master and not master.startswith("local") and not staging:
        raise click.BadParameter(f"master {redact_url(master)!r} needs a staging URI every node sees", param_hint="--staging")
    check_staging(staging)  # a missing local directory: exit 1 before the JVM starts
    found = [(p, fmt or detect_format(p)) for p in discover(list(paths))]  # missing files: exit 1 here
    formats = {f for _p, f in found}
    if "csv" not in formats:
        for name, flag in (("delimiter", "--delimiter"), ("quote", "--quote"), ("no_header", "--no-header")):
            if ctx.get_parameter_source(name).name == "COMMANDLINE":
                raise click.BadParameter(f"applies to CSV files; these are {', '.join(sorted(formats))}",
                                         param_hint=flag)
    _require_topic(source, topic)  # a topic neither stored nor declared: said before the JVM starts
    model_cls = (import_model(model) if model else pipeline_model(topic)) or source.model_of(topic)
    spark = None
    if _engine_for(source, topic, found, engine, spark_options=bool(remote or master or staging)) == "python":
        note("loading without Spark (a small dump, or nothing new; --engine spark uses Spark)...")
    elif remote:
        note(f"loading on the engine at {redact_url(remote)}...")
        spark = _engine_session(remote, model_cls)
    else:
        import os

        from ..spark.session import build_session

        hint = "" if os.environ.get("MINIKAFKA_VERBOSE") else " (the JVM's own output is hidden; --verbose shows it)"
        note(f"starting Spark{hint}...")
        spark = build_session("minikafka:backfill", master)
    try:
        with sigterm_interrupts():  # SIGTERM stops it as Ctrl-C does (exit 143)
            result = _run_backfill(spark, source, topic, paths, model_cls, fmt, delimiter, quote, no_header,
                                   as_handled, batch_rows, staging, as_json)
    finally:
        if remote and spark is not None:
            spark.stop()  # this client's session on the engine; the engine stays up
    if as_json:
        r = result.run
        echo_json({"topic": topic, "run_id": r.run_id, "status": r.status, "files": [str(f.path) for f in result.files],
                   "skipped_files": result.skipped_files, "rows_read": result.rows_read, "rows_loaded": r.rows_out,
                   "rows_duplicate": r.rows_duplicate, "rows_quarantined": r.rows_quarantined,
                   "seconds": r.duration_s})


def _engine_for(source: Source, topic: str, found: list, requested: str, *, spark_options: bool) -> str:
    """python or spark for this backfill (``util.dumpsize.choose_engine``): the dump's rows are
    counted up to the limit, and a larger dump is hashed to see whether it is loaded already."""
    from ..ledger.consuming import loads
    from ..util.dumpsize import SMALL_DUMP_ROWS, all_loaded, choose_engine, dump_rows

    if requested != "auto" or spark_options:
        return choose_engine(requested, 0, spark_options=spark_options)
    rows = dump_rows(found, stop_after=SMALL_DUMP_ROWS)
    if rows <= SMALL_DUMP_ROWS:
        return choose_engine(requested, rows)
    finished = {sha for sha, (_rows, status) in loads.load_states(source.ledger.conn, topic).items()
                if status == "done"}
    nothing_new = bool(finished) and all_loaded([p for p, _f in found], finished)
    log.debug("backfill of %s: more than %d rows; every file loaded before: %s", topic, SMALL_DUMP_ROWS, nothing_new)
    return choose_engine(requested, rows, nothing_new=nothing_new)


def _require_topic(source: Source, topic: str) -> None:
    """A click error (exit 1) saying how to create ``topic`` unless the ledger holds it (a topic the
    --pipeline declares is there: ``with_source`` created it)."""
    from ..errors import TopicNotFoundError

    try:
        source.layout(topic)
    except TopicNotFoundError as exc:
        defn = click.get_current_context().meta.get("minikafka.pipeline")
        if defn is not None:
            raise click.ClickException(
                f"topic {topic!r} is not declared in {defn.path} (declared: {', '.join(defn.topics) or 'none'}): "
                f"add [topics.\"{topic}\"] with its model and dedup") from exc
        raise click.ClickException(
            f"{exc}: declare it in a pipeline file and pass --pipeline FILE (backfill creates it), or create it with "
            f"'minikafka ingest --source {source.path} --model module:Class --dedup FIELD {topic} FILE'") from exc


def _engine_session(url: str, model_cls):
    """A client session of the engine at ``url`` whose Python workers can import minikafka
    and the model's package (shipped as an artifact, as a pipeline's code is)."""
    import tempfile
    from pathlib import Path

    from ..spark.engine import connect
    from ..util.codezip import zip_packages

    spark = connect(url)
    with tempfile.TemporaryDirectory(prefix="minikafka-backfill-") as scratch:
        code = Path(scratch) / "minikafka-backfill-code.zip"
        zip_packages({"minikafka", model_cls.__module__.split(".")[0]}, code)
        spark.addArtifacts(str(code), pyfile=True)
    return spark


def _run_backfill(spark, source, topic, paths, model_cls, fmt, delimiter, quote, no_header, as_handled,
                  batch_rows, staging, as_json):
    from ..spark.loading.backfill import backfill as run_backfill

    with progress(f"backfill {topic}") as shown:
        def report(line: str) -> None:
            if line.startswith("backfill "):  # the closing summary (on stderr, as before --json existed)
                note(line) if as_json else click.echo(line, err=True)
            else:
                shown.update(line.strip())

        return run_backfill(spark, source, topic, list(paths), model=model_cls, fmt=fmt, delimiter=delimiter,
                            quote=quote, header=not no_header, as_handled=as_handled, batch_rows=batch_rows,
                            staging=staging, progress=report)


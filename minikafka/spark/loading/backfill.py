"""Backfill a topic from historical dumps (JSONL, CSV, Parquet; gzip; directories, globs).

Spark reads the files (one partition per file, so every row keeps its line or row
number) and validates each row against the topic's model on the executors with the
ledger's own encoders. Rows that fail go to the quarantine with ``file:line`` and the
reason. The driver then commits the staged rows (``loadcommit``) in bounded transactions of
``batch_rows``: each inserts its rows (duplicates of the dedup key skipped), its
quarantined rows, and the per-file progress (``ledger/consuming/loads.py``). A killed backfill
re-run skips every row already committed, so the topic ends as if it ran once, with or
without dedup keys; files fully loaded before (same content hash) are skipped.
"""

from __future__ import annotations

import glob
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from ...api.source import Source
from ...errors import BackfillError, BackfillOptionError, InputFileError
from ...ledger.consuming import (
    RunResult,
    failure_status,
    interruption,
    loads,
    new_run_id,
    resume_note,
    start_run_in_current_transaction,
    write_run_in_current_transaction,
)
from ...ledger.topics import MAX_ATTACHED, TopicLayout, bulk, catalog, keyed
from ...ledger.transactions import commit_slices
from ...util import dumpfiles
from ...util.clock import utc_now
from ...util.faults import checkpoint
from ...util.redact import redact_url
from ...util.results import Result
from ..engine import master_of, parallelism
from ..types import storage_arrow_fields
from . import dumpsplit
from .loadcommit import arrow_slices, row_file_slices
from .rowcheck import CSV_EMPTY, RowChecker

FORMATS = tuple(dumpfiles.DUMP_FORMATS)
CSV_NULL = "\x00minikafka:null\x00"  # Spark's nullValue: no CSV field equals it, so "" stays ""


def check_options(*, fmt: str | None, delimiter: str, quote: str, batch_rows: int) -> None:
    """Refuse nonsense options before any file is read or Spark job started.

    Raises:
        BackfillOptionError: names the option.
    """
    if fmt is not None and fmt not in dumpfiles.DUMP_FORMATS:
        raise BackfillOptionError(f"format must be one of {FORMATS}, got {fmt!r}")
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise BackfillOptionError(f"batch_rows must be a whole number of at least 1, got {batch_rows!r}")
    for name, value in (("delimiter", delimiter), ("quote", quote)):
        if not isinstance(value, str) or len(value) != 1:
            raise BackfillOptionError(f"{name} must be one character, got {value!r}")
    if delimiter == quote:
        raise BackfillOptionError(f"delimiter and quote are both {quote!r}")


def check_staging(staging: str | None) -> None:
    """A local staging location (a plain path or a ``file://`` URI) must be an existing
    directory: checked before Spark starts. Other URIs are checked by the run (``check_area``).

    Raises:
        StagingError: naming the location.
    """
    from ...errors import StagingError
    from .. import staging as stg

    if not staging or staging == stg.LOCAL:
        return
    uri = stg.normalize_uri(staging)
    if not uri.startswith("file://"):
        return
    path = Path(uri[len("file://"):])
    if not path.exists():
        raise StagingError(f"staging location {redact_url(uri)} does not exist: create it (on storage every node sees), "
                           "or fix the path")
    if not path.is_dir():
        raise StagingError(f"staging location {redact_url(uri)} is not a directory")


@dataclass
class DumpFile:
    path: Path
    format: str
    sha256: str
    size: int
    empty: bool
    columns: list[str] | None = None  # CSV header (or the model's fields, in order, without one)
    raw_sha256: str | None = None  # of the file's bytes when ``sha256`` is of its decompressed content
    gzip: bool = False  # the content is gzip (by its magic bytes, whatever the name says)
    spark_path: Path | None = None  # where Spark reads it when its name misleads Spark about gzip
    chunks: list = field(default_factory=list)  # JSONL content cut into line chunks (``dumpsplit``)
    jobs: object = None  # jsonlparts.ChunkJobs: its chunks validated while the file was cut

    @property
    def misnamed(self) -> bool:
        """The name says gzip and the content is not, or the other way round (Spark goes by the name)."""
        return self.gzip != dumpfiles.named_gzip(self.path)

    @property
    def keys(self) -> list[str]:
        """Every hash this file may be recorded under in the loads table (``ledger/consuming/loads.py``)."""
        return [self.sha256] + ([self.raw_sha256] if self.raw_sha256 and self.raw_sha256 != self.sha256 else [])


@dataclass
class BackfillResult(Result):
    run: RunResult
    files: list[DumpFile] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)
    rows_read: int = 0

    def summary(self) -> str:
        r = self.run
        return (f"backfill {r.outputs[0]}: {len(self.files)} file(s) ({len(self.skipped_files)} already loaded), "
                f"{self.rows_read:,} rows read, {r.rows_out:,} loaded, {r.rows_duplicate:,} duplicates skipped, "
                f"{r.rows_quarantined:,} quarantined, {r.duration_s or 0:.1f} s")


def detect_format(path: Path) -> str:
    """The dump format ``path``'s name tells (``dumpfiles.DUMP_FORMATS``).

    Raises:
        BackfillError: the name tells none.
    """
    found = dumpfiles.detect_dump_format(path)
    if found is None:
        raise BackfillError(f"{path}: cannot tell the format from the name; pass --format {'|'.join(FORMATS)}")
    return found


def discover(paths: list[str | Path]) -> list[Path]:
    """Files named, in directories (recursively, hidden files skipped) or matching globs; sorted."""
    found: list[Path] = []
    for raw in paths:
        text = str(raw)
        matches = [Path(m) for m in sorted(glob.glob(text, recursive=True))] if any(c in text for c in "*?[") else [Path(text)]
        if not matches:
            raise BackfillError(f"{text}: no file matches")
        for p in matches:
            if p.is_dir():
                found += sorted(f for f in p.rglob("*") if f.is_file() and not any(x.startswith(".") for x in f.relative_to(p).parts))
            elif p.is_file():
                found.append(p)
            else:
                raise BackfillError(f"{p}: file not found")
    return found


LINE_BYTES = 512  # a JSONL line of a dump, about: chunks are sized from the rows of a transaction


def inspect(path: Path, fmt: str | None, *, delimiter: str, header: bool,
            loaded: frozenset[str] | set[str] = frozenset(), chunks_to: str | None = None,
            on_chunk=None, chunk_bytes: int | None = None, hash_in_pass: bool = True) -> DumpFile:
    """Hash the file, check a gzip is complete, read a CSV header (``minikafka.util.dumpfiles``).

    Gzip is known by its magic bytes, not by the name. A gzip file is known by the hash of
    its decompressed content, so a re-compressed copy of a loaded dump is recognised as
    loaded; a file whose bytes hash to one of ``loaded`` is returned at once, without
    decompressing it. ``hash_in_pass`` False: a plain file is hashed first too, and one
    loaded before is not cut into chunks (the Python engine: nothing new costs one read).

    ``chunks_to``: a JSONL file's content is also cut into line chunks under this URI in
    the same pass (``dumpsplit``), for Spark to read in parallel; ``on_chunk`` is called
    with each chunk as soon as it is complete; ``chunk_bytes``: their size (default
    ``dumpsplit.CHUNK_BYTES``).
    """
    from .dumpsplit import ChunkWriter

    fmt = fmt or detect_format(path)
    writer = None
    try:
        gz = dumpfiles.is_gzip(path)
        raw_digest = dumpfiles.raw_digest(path) if gz or (loaded and not hash_in_pass) else None
        if raw_digest in loaded:  # loaded before: returned without cutting it into chunks
            return DumpFile(path, fmt, raw_digest, path.stat().st_size, False, raw_sha256=raw_digest, gzip=gz)
        if not gz:
            raw_digest = None  # a plain file's content hash is its bytes' hash: computed in the pass below
        if chunks_to is not None and fmt == "jsonl":
            writer = ChunkWriter(chunks_to, chunk_bytes, on_chunk=on_chunk)
        scanned = dumpfiles.scan(path, raw_sha256=raw_digest, sink=writer.feed if writer else None)
    except BaseException as exc:
        if writer is not None:
            writer.abort()  # the caller removes the staging directory
        if isinstance(exc, InputFileError) and not isinstance(exc, BackfillError):
            raise BackfillError(str(exc)) from exc
        raise
    dump = DumpFile(path, fmt, scanned.sha256, path.stat().st_size, not scanned.has_data,
                    raw_sha256=scanned.raw_sha256, gzip=scanned.gzip,
                    chunks=writer.close() if writer else [])
    if fmt == "csv" and header and not dump.empty:
        import csv

        with dumpfiles.open_binary(path) as raw:
            first = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="").readline()
        dump.columns = next(csv.reader([first], delimiter=delimiter))
    return dump


def _read(spark, dump: DumpFile, *, delimiter: str, quote: str, header: bool):
    """One CSV or Parquet file as a DataFrame of raw rows plus ``_mk_file`` (Spark keeps the
    file in one partition). JSONL dumps are read from their chunks (``jsonlparts``)."""
    from pyspark.sql import functions as F

    path = str(dump.spark_path) if dump.spark_path else str(dump.path.resolve())  # the link itself
    try:
        reader = dumpfiles.dump_format(dump.format).reader
    except ValueError as exc:  # never handed to another format's reader
        raise BackfillError(f"{dump.path}: {exc}") from None
    if reader == "csv":
        from pyspark.sql import types as T

        names = dump.columns or []
        schema = T.StructType([T.StructField(n, T.StringType(), True) for n in names]
                              + [T.StructField("_mk_text", T.StringType(), True)])
        # an empty unquoted field reads as null, an empty quoted one as CSV_EMPTY (never as
        # nullValue: no field equals it); the validator maps both (see _csv_value)
        df = (spark.read.schema(schema).option("header", header).option("sep", delimiter).option("quote", quote)
              .option("escape", quote).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_mk_text")
              .option("nullValue", CSV_NULL).option("emptyValue", CSV_EMPTY).option("multiLine", True).csv(path))
    elif reader == "parquet":
        df = spark.read.parquet(path)
    else:
        raise BackfillError(f"{dump.path}: {dump.format} dumps are read from their chunks, not as one file")
    return df.withColumn("_mk_file", F.lit(dump.path.name))


def csv_line_map(path: Path, *, delimiter: str, quote: str, header: bool) -> list[tuple[int, int]]:
    """Where each CSV record starts, as breakpoints ``(record line, shift)`` for :func:`map_line`.

    Spark numbers records, not lines: record ``k`` (0-based, after the header) gets the
    line ``k + 2`` (``k + 1`` without a header). Records spanning several lines (a quoted
    field holding line breaks) and blank lines (which Spark skips) shift the rest. This
    reads the file once with Python's CSV reader (same quoting rules) and keeps only the
    points where the shift changes, so the map stays small.
    """
    import csv
    import sys

    csv.field_size_limit(max(csv.field_size_limit(), min(sys.maxsize, 2**31 - 1)))
    offset = 2 if header else 1
    points: list[tuple[int, int]] = []
    shift, k, before, skip_header = 0, 0, 0, header
    with dumpfiles.open_binary(path) as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=""),
                            delimiter=delimiter, quotechar=quote, doublequote=True)
        for row in reader:
            start, before = before + 1, reader.line_num
            if not row:
                continue  # a blank line: Spark skips it
            if skip_header:
                skip_header = False
                continue
            if start - (k + offset) != shift:
                shift = start - (k + offset)
                points.append((k + offset, shift))
            k += 1
    return points


def _spark_schema(layout: TopicLayout):
    from pyspark.sql import types as T

    fields = [T.StructField(n, t, True) for n, t in storage_arrow_fields(layout)]
    fields += [T.StructField("_mk_file", T.StringType()), T.StructField("_mk_line", T.LongType()),
               T.StructField("_mk_error", T.StringType()), T.StructField("_mk_payload", T.StringType())]
    return T.StructType(fields)


def backfill(spark, source: Source, topic: str, paths: list[str | Path], *, model: type[BaseModel] | None = None,
             fmt: str | None = None, delimiter: str = ",", quote: str = '"', header: bool = True,
             as_handled: bool = False, batch_rows: int = 50_000, staging: str | None = None,
             progress: Callable[[str], None] | None = print) -> BackfillResult:
    """Load dumps into ``topic``; see the module docstring.

    ``spark`` None: the Python engine, no JVM (for a small dump: ``util.dumpsize``). The same
    validation code runs in this process instead of in Spark's tasks (a JSONL chunk's
    ``ChunkTask``, a CSV or Parquet file's ``RowChecker`` on the rows Spark's reader would give,
    ``localread``), and the same commit follows: the same rows, quarantine (``file:line``
    and reason), skipped duplicates and files, run row, and resumption after a kill.

    ``staging``: as for ``run_stage``: a URI every node sees (required on a non-local
    master). JSONL dumps are cut into chunks there, so only CSV and Parquet dumps must
    lie on storage the executors see too, at the same path.

    Raises:
        StageRunningError: another backfill of this topic is running.
        StagingError: the staging location is missing or unusable, or the staged rows
            differ from what Spark reported writing (nothing of that file is committed).
        BackfillError: a file-level problem (names the file); nothing of that run is written.
        BackfillOptionError: a nonsense option (names it); checked before anything else.
        StagingError: also raised before anything is read when a local staging path is missing.
        TopicNotFoundError: the topic does not exist.
        BackfillError: also when the topic is a keyed table (appended slices cannot merge).
    """
    from ...errors import StageRunningError
    from ...util.filelock import LockBusy, exclusive_lock
    from .. import staging as stg

    check_options(fmt=fmt, delimiter=delimiter, quote=quote, batch_rows=batch_rows)
    check_staging(staging)
    model = model or source.model_of(topic)
    layout = catalog.check_model(source.ledger.conn, source.layout(topic), model)  # checked as reopening checks
    if keyed.table_spec(source.ledger.conn, topic) is not None:  # appended slices would bypass the merge
        raise BackfillError(f"{topic!r} is a keyed table: backfill appends rows and cannot merge them by key; "
                            "backfill the dumps into a topic and let a stage write the table, or use "
                            "'minikafka ingest' (which merges); nothing was written")
    found = discover(paths)
    run = RunResult(new_run_id(f"backfill-{topic}"), "backfill", stage=f"backfill:{topic}", outputs=[topic],
                    inputs=[str(p) for p in found],
                    details={"as_handled": as_handled, "engine": "spark" if spark is not None else "python"})
    result = BackfillResult(run, [])
    master = master_of(spark) if spark is not None else "local[*]"
    staging_uri = None
    aliases = None
    files: list[DumpFile] = []
    started: list = []  # ChunkJobs, closed whatever happens
    try:
        # one backfill of a topic at a time: the load states are read, and the dumps cut
        # into chunks, under the lock; staging is per run and removed after
        with exclusive_lock(stg.lock_path(source, f"backfill-{topic}"), note=f"run {run.run_id}"):
            with source.ledger.atomic() as conn:  # the 'running' row: a killed backfill shows as interrupted
                dead = start_run_in_current_transaction(conn, run, str(stg.lock_path(source, f"backfill-{topic}")),
                                                        holding_lock=True)
            if dead and progress:
                progress(resume_note(dead))
            checkpoint("backfill:started")
            area = stg.choose_staging(master, staging, source.path)
            stg.check_area(area)
            staging_uri = area.run_uri(f"backfill-{topic}", run.run_id)
            marker = stg.lock_path(source, f"backfill-{topic}").with_suffix(".staging")
            if marker.exists():  # a crashed run's staging: never trusted
                stg.remove(marker.read_text().strip())
            marker.write_text(staging_uri)
            done = loads.load_states(source.ledger.conn, topic)
            finished = {sha for sha, (_rows, status) in done.items() if status == "done"}
            # transactions (and the JSONL chunks that feed them) grow with the topic's key index
            grown = bulk.transaction_rows(source.ledger.conn, topic, batch_rows)
            # chunks grow with them once a transaction outgrows the usual chunks it spans
            # (a JSONL transaction spans up to MAX_ATTACHED chunks: loadcommit.row_file_slices)
            chunk_bytes = grown * LINE_BYTES // MAX_ATTACHED \
                if grown > batch_rows and grown * LINE_BYTES // MAX_ATTACHED > dumpsplit.CHUNK_BYTES else None
            batch_rows = run.details["transaction_rows"] = grown
            t0 = time.perf_counter()
            # with no partly loaded file in the topic, no line is to be skipped: Spark
            # validates each chunk while the rest of the dump is still being cut
            early = spark is not None and all(status == "done" for _rows, status in done.values())
            for i, p in enumerate(found):
                jobs = None
                if early and (fmt or detect_format(p)) == "jsonl":
                    from .jsonlparts import ChunkJobs

                    jobs = ChunkJobs(spark, model, layout, p.name, stg.join(staging_uri, f"early-{i:05d}"),
                                     yield_cpu=stg.is_local_master(master))
                    started.append(jobs)
                dump = inspect(p, fmt, delimiter=delimiter, header=header, loaded=finished,
                               chunks_to=stg.join(staging_uri, f"chunks-{i:05d}"),
                               on_chunk=jobs.submit if jobs else None, chunk_bytes=chunk_bytes,
                               hash_in_pass=spark is not None)
                dump.jobs = jobs
                files.append(dump)
            result.files = files
            run.details["split_seconds"] = round(time.perf_counter() - t0, 2)
            for dump in files:  # progress recorded under any of the file's hashes counts
                state = next((done[k] for k in dump.keys if k in done), None)
                if state is not None:
                    done[dump.sha256] = state
            todo = []
            for dump in files:
                state = done.get(dump.sha256)
                if state and state[1] == "done":
                    result.skipped_files.append(str(dump.path))
                elif not dump.empty:
                    todo.append(dump)
                    continue
                if dump.jobs is not None:  # loaded already (or empty): what was validated is dropped
                    dump.jobs.close()
            _check_csv_headers(todo, model, header)
            misnamed = [d for d in todo if d.misnamed and d.format == "csv"]
            if misnamed and not stg.is_local_master(master):
                d = misnamed[0]
                raise BackfillError(f"{d.path}: its content is {'gzip' if d.gzip else 'not gzip'} but its name says "
                                    f"otherwise; rename it (executors on a cluster go by the name)")
            if misnamed:
                aliases = _alias_misnamed(misnamed)
            if todo:
                with source.ledger.bulk_load():  # the run's last commit (below) is the durable one
                    for i, dump in enumerate(todo):
                        _load(spark, source, model, layout, dump, stg.join(staging_uri, f"{i:05d}"), run, result,
                              done, as_handled=as_handled, batch_rows=batch_rows, progress=progress,
                              delimiter=delimiter, quote=quote, header=header)
            stg.remove(staging_uri)
            staging_uri = None
            marker.unlink(missing_ok=True)
        run.finish("succeeded")
    except LockBusy as exc:
        run.finish("failed", f"backfill of {topic!r} is running ({exc.holder})")
        raise StageRunningError(f"a backfill of topic {topic!r} is running ({exc.holder}); this one did nothing") from None
    except BaseException as exc:
        run.finish(failure_status(exc),
                   interruption(exc) if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}")
        if staging_uri is not None:
            try:  # the chunks and staged rows of a failed run: nothing of them is trusted later
                stg.remove(staging_uri)
            except Exception:  # noqa: BLE001 - the marker removes them on the next run
                pass
        raise
    finally:
        for jobs in started:
            jobs.close()
        if aliases is not None:
            aliases.cleanup()
        with source.ledger.atomic() as conn:
            if run.status == "succeeded":
                loads.mark_done_in_current_transaction(conn, topic, [(key, d.path.name) for d in files for key in d.keys],
                                                       run.run_id, utc_now())
            write_run_in_current_transaction(conn, run)
    if progress:
        progress(result.summary())
    return result


def _check_csv_headers(todo: list[DumpFile], model: type[BaseModel], header: bool) -> None:
    for dump in todo:
        if dump.format == "csv" and not header:  # no header row: the model's fields, in order
            dump.columns = list(model.model_fields)
        if dump.format == "csv" and dump.columns is not None:
            required = [n for n, f in model.model_fields.items() if f.is_required()]
            missing = [n for n in required if n not in dump.columns]
            if missing:
                raise BackfillError(f"{dump.path}: CSV header lacks required column(s) {missing} (header: {dump.columns})")


def _alias_misnamed(dumps: list[DumpFile]):
    """Point each dump's ``spark_path`` at a link named as its content is (``.gz`` added or
    dropped): Spark decides gzip by the name. Returns the temporary directory holding them."""
    import os
    import tempfile

    tmp = tempfile.TemporaryDirectory(prefix="minikafka-backfill-")
    for i, dump in enumerate(dumps):
        name = dump.path.name + ".gz" if dump.gzip else dump.path.name[: -len(dump.path.suffix)]
        link = Path(tmp.name) / f"{i:05d}" / name
        link.parent.mkdir()
        os.symlink(dump.path.resolve(), link)
        dump.spark_path = link
    return tmp


def _load(spark, source: Source, model: type[BaseModel], layout: TopicLayout, dump: DumpFile, uri: str,
          run: RunResult, result: BackfillResult, done: dict, *, as_handled: bool, batch_rows: int, progress,
          **opts) -> None:
    """Validate one dump with Spark, staged under ``uri``, and commit its rows.

    A JSONL dump's chunks are validated one Spark task each (``jsonlparts``), and each
    chunk's rows are committed as soon as its task has written them. A CSV or Parquet
    file is read as one partition (its line numbers come from Spark's record order),
    split by line ranges so all cores validate, staged as Parquet, then committed.
    """
    from ..staging import is_local_master
    from .jsonlparts import ChunkJobs, LocalChunkJobs

    already = done.get(dump.sha256, (0, "partial"))[0]
    details = run.details
    if dump.format == "jsonl" and dump.chunks:
        jobs = dump.jobs  # started while the dump was cut, or now for a resumed load
        if jobs is None:
            # chunks an interrupted run committed entirely are not read again
            chunks = [c for c in dump.chunks if c.first_line + c.lines - 1 > already]
            if not chunks:
                return
            if spark is None:  # the Python engine: the same task, in this process
                jobs = LocalChunkJobs(model, layout, dump.path.name, uri, already=already)
            else:
                jobs = ChunkJobs(spark, model, layout, dump.path.name, uri,
                                 yield_cpu=is_local_master(master_of(spark)), already=already)
            for chunk in chunks:
                jobs.submit(chunk)
        jobs.on_wait = source.ledger.checkpoint  # the WAL is checkpointed while Spark validates
        # a transaction spans several chunks: sized by the key index this dump's rows grow it to
        rows = bulk.transaction_rows(source.ledger.conn, layout.name, batch_rows,
                                     adding=sum(c.lines for c in dump.chunks))
        details["transaction_rows"] = max(details.get("transaction_rows", 0), rows)
        try:
            commit_slices(source.ledger, layout, dump.path.name, dump.sha256,
                          row_file_slices(source, jobs, layout, rows, already, run.run_id,
                                          commit_now=jobs.last_running), run, result,
                          as_handled=as_handled, progress=progress)
        finally:
            jobs.close()
            if spark is None:
                details["check_seconds"] = round(details.get("check_seconds", 0) + jobs.check_seconds, 2)
            else:
                details["spark_seconds"] = round(details.get("spark_seconds", 0) + jobs.spark_seconds, 2)
        return
    if spark is None:  # the Python engine: the rows Spark's reader would give, checked here
        commit_slices(source.ledger, layout, dump.path.name, dump.sha256,
                      arrow_slices(_checked_locally(dump, model, layout, batch_rows, details, **opts), layout,
                                   batch_rows, already, run.run_id),
                      run, result, as_handled=as_handled, progress=progress)
        return
    t0 = time.perf_counter()
    written = _stage_file(spark, dump, model, layout, uri, **opts)
    details["spark_seconds"] = round(details.get("spark_seconds", 0) + time.perf_counter() - t0, 2)
    commit_slices(source.ledger, layout, dump.path.name, dump.sha256,
                  arrow_slices(_staged_batches(uri, written, batch_rows), layout, batch_rows, already, run.run_id),
                  run, result, as_handled=as_handled, progress=progress)


def _checked_locally(dump: DumpFile, model, layout: TopicLayout, batch_rows: int, details: dict, *, delimiter: str,
                     quote: str, header: bool):
    """A CSV or Parquet dump's rows read and checked in this process (the Python engine), as
    ``_stage_file`` has Spark read and check them: Arrow batches of storage values, errors
    and payloads, in line order."""
    from .localread import csv_batches, parquet_batches

    nullable = {c.name for c in layout.columns if c.nullable}
    reader = dumpfiles.dump_format(dump.format).reader
    if reader == "csv":
        raw = csv_batches(dump.path, dump.columns or [], delimiter=delimiter, quote=quote, header=header,
                          file_name=dump.path.name, batch_rows=batch_rows)
        # the lines are the records' own first lines already: no record-number map
        checker = RowChecker(model, layout, dump.format, nullable,
                             {"columns": dump.columns or [], "delimiter": delimiter, "quote": quote, "lines": []})
    elif reader == "parquet":
        raw = parquet_batches(dump.path, file_name=dump.path.name, batch_rows=batch_rows)
        checker = RowChecker(model, layout, dump.format, nullable)
    else:
        raise BackfillError(f"{dump.path}: {dump.format} dumps are read from their chunks, not as one file")
    for batch in raw:
        t0 = time.perf_counter()
        checked = checker.validate(batch)
        details["check_seconds"] = round(details.get("check_seconds", 0) + time.perf_counter() - t0, 2)
        if checked.num_rows:
            yield checked


def _stage_file(spark, dump: DumpFile, model, layout: TopicLayout, uri: str, *, delimiter: str, quote: str,
                header: bool) -> int:
    """Validate one CSV or Parquet file and stage it under ``uri``; return the rows written."""
    from pyspark.sql import functions as F

    from ..staging import write_counted

    nullable = {c.name for c in layout.columns if c.nullable}
    previous = spark.conf.get("spark.sql.files.maxPartitionBytes")
    # one partition per file keeps rows in file order, so line numbers are exact
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(1 << 40))
    try:
        parallel = max(2, parallelism(spark))
        df = _read(spark, dump, delimiter=delimiter, quote=quote, header=header)
        csv_opts = None
        if dump.format == "csv":
            csv_opts = {"columns": dump.columns or [], "delimiter": delimiter, "quote": quote,
                        "lines": csv_line_map(dump.path, delimiter=delimiter, quote=quote, header=header)}
        offset = 2 if dump.format == "csv" and header else 1
        # the file is one partition here, so the id is the row's position in the file
        numbered = df.withColumn("_mk_line", F.monotonically_increasing_id() + offset)
        # split by line ranges before validating, so all cores validate and part files stay in line order
        ranged = numbered.repartitionByRange(parallel, "_mk_line").sortWithinPartitions("_mk_line")
        checker = RowChecker(model, layout, dump.format, nullable, csv_opts)
        out = ranged.mapInArrow(checker.mapper, _spark_schema(layout))
        return write_counted(out, uri, row_group_bytes=8 << 20)
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", previous)


def _staged_batches(uri: str, written: int, batch_rows: int):
    import pyarrow.dataset as ds

    from ..staging import filesystem, open_staged

    # checks the _SUCCESS marker and the row count against what Spark wrote, before any commit
    staged = open_staged(uri, written)
    fs, _ = filesystem(uri)
    parts = sorted(f for f in staged.files if f.rsplit("/", 1)[-1].startswith("part-"))
    dataset = ds.dataset(parts, format="parquet", filesystem=fs)  # part files in order: rows sorted by line
    yield from dataset.to_batches(batch_size=batch_rows, batch_readahead=0, fragment_readahead=0, use_threads=False)

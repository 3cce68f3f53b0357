"""Shared pieces of the CLI: the ledger and pipeline options, --json, error mapping.

Every command that opens a ledger takes the same options through ``with_source``:

- ``--source FILE`` (or ``-s``), else ``--pipeline FILE`` (its ``source =``), else the
  ``MINIKAFKA_SOURCE`` environment variable; with none of them the command stops with a
  usage error (exit 2). No command falls back to the example's path.
- library errors (``MinikafkaError``) become one ``Error:`` line, exit 1 (in ``app.MinikafkaGroup``, for every command).
- no command creates a ledger (or a directory) by accident: a missing file is an error
  naming the path (exit 1). Only commands that create things (``ingest``, ``backfill``,
  ``run``, ``watch``) create one, and only with ``--create`` (which also creates missing
  directories) or, for ``ingest``/``backfill``, into the ``source =`` of the pipeline
  that declares the topic (its missing directories too).
- reading commands open the file read-only: they work on read-only files and mounts
  and never wait behind a writer.

Commands over a pipeline file take it as a positional PIPELINE argument or as
``--pipeline FILE`` (or ``MINIKAFKA_PIPELINE``) through ``pipeline_argument``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from ..errors import LedgerError, LedgerNotFoundError, MinikafkaError
from ..ledger.topics import float_text
from ..util.clock import format_timestamp

if TYPE_CHECKING:
    from ..api.source import Source

log = logging.getLogger("minikafka.cli")

SOURCE_ENV = "MINIKAFKA_SOURCE"
PIPELINE_ENV = "MINIKAFKA_PIPELINE"
VERBOSE_ENV = "MINIKAFKA_VERBOSE"


def json_value(value):
    """``value`` with what strict JSON cannot hold spelled out, for every JSON the CLI prints:
    datetimes as the ledger stores them (UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, what --where
    takes), dates as ``YYYY-MM-DD``, and infinite (or NaN) floats as the strings
    ``"Infinity"``, ``"-Infinity"``, ``"NaN"`` (which pydantic and Spark read back as floats).
    Lists, tuples, sets and dicts are walked; anything else JSON lacks prints as ``str()``."""
    import math
    from datetime import date, datetime

    if isinstance(value, float):
        return value if math.isfinite(value) else float_text(value)
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_value(v) for v in value]
    return value


def json_text(value, **kwargs) -> str:
    """``value`` as strict JSON text (see ``json_value``); never a bare NaN or Infinity."""
    return json.dumps(json_value(value), default=str, ensure_ascii=False, allow_nan=False, **kwargs)


def _row_json(row: tuple, decode) -> str:
    """One stored row as a JSON line: metadata first, then the fields."""
    return json_text(row_dict(row, decode))


def row_dict(row: tuple, decode) -> dict:
    """One stored row as a dict: ``_id``, ``_created_at``, ``_status``, ``_parent_id``, then the fields."""
    meta = {"_id": row[0], "_created_at": row[1], "_status": row[2], "_parent_id": row[4]}
    return {**meta, **decode(row)}


def status_fixer(source: Source, layout):
    """A row fixer for rows read with ``select_sql``: the topic-wide status as every consumer
    sees it (rows below the partitions' handled positions count as handled)."""
    from ..ledger.topics import acks

    conn = source.ledger.conn
    handled = acks.handled_positions(conn, layout.name)
    at = layout.partition_index

    def fix(row: tuple) -> tuple:
        return (row[0], row[1], acks.status_of(row[2], row[0], row[at], handled), *row[3:])

    return fix


def echo_json(value) -> None:
    """Print ``value`` as indented JSON (the --json output of every command)."""
    click.echo(json_text(value, indent=2))


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output (stable keys).")


class DefinitionProblem(click.ClickException):
    """A bad pipeline file or selection: exit code 2, like a usage error."""

    exit_code = 2


def _load(pipeline: str, *, check_jobs: bool | str = True, suites: bool = True):
    from ..pipelines.definition import load_pipeline

    try:
        return load_pipeline(pipeline, check_jobs=check_jobs, suites=suites)
    except MinikafkaError as exc:
        raise DefinitionProblem(str(exc)) from exc


def pipeline_source_option(fn):
    """--source FILE on a pipeline command: use this ledger instead of the file's ``source =``.

    Only an explicit option counts: $MINIKAFKA_SOURCE never redirects a pipeline's writes.
    """
    return click.option("--source", "-s", "source_override", metavar="FILE",
                        help="Use this ledger instead of the pipeline file's 'source ='.")(fn)


def check_ledger_path(path: str | Path | None, *, what: str = "--source") -> None:
    """A usage error (exit 2) for a ledger path that is no file: empty, or ``:memory:``.

    The Python API opens ``:memory:``; a command would write into it and throw it all away
    on exit, so the CLI refuses it, as it refuses a missing ledger option.
    """
    if path is None:
        return
    text = str(path)
    if not text.strip():
        raise click.UsageError(f"{what} is empty: pass a ledger file")
    if text == ":memory:":
        raise click.UsageError(
            f"{what} ':memory:' is an in-memory database that is gone when the command exits "
            "(everything it wrote would be lost): pass a ledger file")


def load_with_source(pipeline: str, source_override: str | None, *, check_jobs: bool | str = True,
                     suites: bool = True):
    """The pipeline definition, with its ledger replaced by ``source_override`` when given.

    ``check_jobs`` False: the stages' job modules are not imported (a command that needs
    only the topics, like ``ingest``, works where the jobs cannot be imported); "source":
    checked from their source, not imported.
    ``suites`` False: expectation suites are read only when a stage needs them.
    """
    check_ledger_path(source_override)
    defn = _load(pipeline, check_jobs=check_jobs, suites=suites)
    if source_override:
        defn.source = Path(source_override).resolve()
    return defn


def _explicit(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.PROMPT)


def resolve_source_path(ctx: click.Context, source_path: str | None, pipeline: str | None) -> str:
    """--source, else --pipeline's ``source =``, else $MINIKAFKA_SOURCE; a usage error when none.

    The loaded pipeline (if any) is kept in ``ctx.meta['minikafka.pipeline']``.
    """
    if source_path is not None and _explicit(ctx, "source_path"):
        check_ledger_path(source_path)
        return source_path
    if pipeline:
        defn = _load(pipeline, check_jobs="source")  # the jobs read, not imported (no pyspark for a status)
        ctx.meta["minikafka.pipeline"] = defn
        return str(defn.source)
    if source_path:
        check_ledger_path(source_path, what=f"${SOURCE_ENV}")
        return source_path
    raise click.UsageError(
        f"which ledger? pass --source FILE, --pipeline FILE, or set {SOURCE_ENV}", ctx=ctx)


def pipeline_model(topic: str):
    """The model the --pipeline file declares for ``topic`` (None without --pipeline or when undeclared)."""
    defn = click.get_current_context().meta.get("minikafka.pipeline")
    declared = defn.topics.get(topic) if defn is not None else None
    return declared.model if declared is not None else None


SOURCE_HINT = f"check the path (--source, the --pipeline's 'source =', or ${SOURCE_ENV})"
CREATE_HINT = "; --create starts a new ledger there (and creates its directory)"


def create_option(fn):
    """--create: let a creating command start a new ledger (and its missing directories)."""
    return click.option("--create", "create_ledger", is_flag=True,
                        help="Create the ledger (and its missing directories) if it does not exist yet.")(fn)


def open_ledger(path: str, *, read_only: bool = False, create: bool = False, parents: bool = False,
                hint: str = SOURCE_HINT) -> Source:
    """Open the ledger at ``path`` for a command: read-only, or for writing without creating it.

    Args:
        create: a missing file becomes a new ledger (its directory must exist).
        parents: with create, missing directories are created too (``--create``).
        hint: what the error for a missing ledger suggests.

    Raises:
        click.UsageError: ``path`` is empty or ``:memory:`` (exit 2).
        click.ClickException: no ledger at ``path`` (the message names it), or it cannot be opened.
    """
    check_ledger_path(path)
    log.debug("opening the ledger %s (%s)", path, "read-only" if read_only else "for writing")
    if create and parents:
        try:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise click.ClickException(f"cannot create the directory of {path}: {exc}") from exc
    from ..api.source import Source  # here: a command that opens no Source starts without the API

    try:
        return Source(path, read_only=read_only, create=create)
    except LedgerNotFoundError as exc:
        raise click.ClickException(f"{exc}: {hint}") from exc
    except LedgerError as exc:
        if create and not Path(path).expanduser().resolve().parent.is_dir():
            raise click.ClickException(f"{exc}{CREATE_HINT}") from exc
        raise click.ClickException(str(exc)) from exc
    except sqlite3.Error as exc:
        raise click.ClickException(f"{path}: {exc}") from exc


def require_ledger(path: str | Path, *, hint: str = SOURCE_HINT) -> None:
    """A click error (exit 1) naming ``path`` unless a ledger file is there; creates nothing
    (a usage error for an empty path or ``:memory:``)."""
    check_ledger_path(path)
    file = Path(path).expanduser()
    if file.is_file():
        return
    why = "" if file.resolve().parent.is_dir() else f" (directory {file.resolve().parent} does not exist)"
    raise click.ClickException(f"no ledger at {path}{why}: {hint}")


def pipeline_hint(defn, *, creates: bool = False) -> str:
    """What a missing pipeline ledger's error suggests: the path to check, how to start it."""
    from ..pipelines.opening import start_hint

    return f"check 'source =' in {defn.path} (or --source); {start_hint(defn, flag=creates)}"


def ensure_pipeline_ledger(defn, *, create: bool = False, parents: bool = False, creates: bool = False) -> None:
    """Before a pipeline command opens its ledger: an error naming a missing file (exit 1),
    or with ``create`` a new empty ledger (``parents``: and its missing directories).

    ``creates``: the command takes --create (the error message says so).
    """
    path = str(defn.source)
    if Path(path).is_file():
        return
    hint = pipeline_hint(defn, creates=creates or create)
    if not create:
        require_ledger(path, hint=hint)
    open_ledger(path, create=True, parents=parents, hint=hint).close()


def with_source(fn=None, *, read_only=False, creates: bool = False):
    """The options every command that opens a ledger shares: --source, --pipeline.

    The command receives an open ``Source`` as its first argument. A missing file is an
    error naming the path, never a new ledger, unless the command ``creates`` things:
    then it takes ``--create``, and the ``source =`` of a --pipeline file is created
    too (its directory must exist).

    Args:
        read_only: True, or a function of the command's keyword arguments returning
            True (``consumers`` lists read-only, ``consumers --drop`` writes): the
            Source is opened read-only, so the command works on read-only files and
            never waits behind a writer.
    """
    if fn is None:
        return functools.partial(with_source, read_only=read_only, creates=creates)

    @click.option("--source", "-s", "source_path", envvar=SOURCE_ENV, metavar="FILE",
                  help=f"The SQLite ledger file (default: ${SOURCE_ENV}, or the --pipeline's source).")
    @click.option("--pipeline", "-p", "ledger_pipeline", metavar="FILE",
                  help="Take the ledger from this pipeline file's 'source ='.")
    @functools.wraps(fn)
    def wrapper(source_path: str | None, ledger_pipeline: str | None, **kwargs):
        ctx = click.get_current_context()
        create_flag = bool(kwargs.pop("create_ledger", False)) if creates else False
        path = resolve_source_path(ctx, source_path, ledger_pipeline)
        declared = (ledger_pipeline is not None and "minikafka.pipeline" in ctx.meta
                    and path == str(ctx.meta["minikafka.pipeline"].source))
        ro = read_only(kwargs) if callable(read_only) else bool(read_only)
        defn = ctx.meta["minikafka.pipeline"] if declared else None
        hint = SOURCE_HINT + (CREATE_HINT if creates else "")
        if defn is not None and not creates:  # the pipeline's own ledger: say how it starts
            hint = pipeline_hint(defn)
        source = open_ledger(path, read_only=ro, create=creates and (create_flag or declared), parents=create_flag,
                             hint=hint)
        try:
            with source:
                if defn is not None and not ro:  # a command that writes: the declared topics exist first
                    from ..pipelines.opening import create_declared

                    create_declared(source, defn)
                return fn(source, **kwargs)
        except sqlite3.Error as exc:  # locked, corrupt, read-only: name the file (library errors: main's group)
            raise click.ClickException(f"{path}: {exc}") from exc

    return create_option(wrapper) if creates else wrapper


def pipeline_argument(fn):
    """PIPELINE as a positional argument (as before) or as --pipeline FILE / $MINIKAFKA_PIPELINE."""

    @click.argument("pipeline_arg", metavar="[PIPELINE]", required=False, type=click.Path(dir_okay=False))
    @click.option("--pipeline", "-p", "pipeline_opt", envvar=PIPELINE_ENV, metavar="FILE",
                  type=click.Path(dir_okay=False), help=f"The pipeline file (default: ${PIPELINE_ENV}).")
    @functools.wraps(fn)
    def wrapper(pipeline_arg: str | None, pipeline_opt: str | None, **kwargs):
        ctx = click.get_current_context()
        if pipeline_arg and pipeline_opt and _explicit(ctx, "pipeline_opt") and pipeline_arg != pipeline_opt:
            raise click.UsageError("give the pipeline once: as PIPELINE or as --pipeline", ctx=ctx)
        pipeline = pipeline_arg or pipeline_opt
        if not pipeline:
            raise click.UsageError(f"which pipeline? pass PIPELINE, --pipeline FILE, or set {PIPELINE_ENV}", ctx=ctx)
        return fn(pipeline, **kwargs)

    return wrapper


def verbose_option(fn):
    """--verbose: show the JVM's own start-up and log output (hidden by default)."""

    def callback(ctx, param, value):
        if value:
            os.environ[VERBOSE_ENV] = "1"
        return value

    return click.option("--verbose", "-v", is_flag=True, expose_value=False, callback=callback, is_eager=True,
                        help="Show the JVM's start-up noise and Spark's log lines.")(fn)


def remote_option(what: str):
    """--remote sc://HOST:PORT: the warm engine a command runs on; ``what`` is its help."""
    return click.option("--remote", metavar="sc://HOST:PORT", help=what)


def engine_options(fn):
    """--engine, --remote, --max-parallel, --idle-timeout: where a run's stages run."""
    fn = click.option("--idle-timeout", metavar="DURATION",
                      help="The engine this run starts or uses stops after this long unused (default: "
                           "[engine] idle_timeout, else 10m; 0: an engine this run started stops at its end).")(fn)
    fn = click.option("--max-parallel", type=click.IntRange(1, 64), metavar="N",
                      help="Run at most N independent stages at once (default: 2 on an engine, 1 with "
                           "--engine submit).")(fn)
    fn = remote_option("Run the stages on the engine at this URL (default: the pipeline's [engine] remote).")(fn)
    fn = click.option("--engine", "engine", type=click.Choice(["auto", "submit", "connect"]),
                      help="auto: a warm engine (the one running, else one started for this run); connect: only "
                           "an engine already running; submit: one spark-submit per stage. Default: "
                           "$MINIKAFKA_ENGINE, else auto (as for run_pipeline).")(fn)
    return fn


def stage_selection(fn):
    """Options shared by run and plan."""
    fn = click.option("--from", "start", help="Run this stage and everything downstream of it.")(fn)
    fn = click.option("--stage", help="Run only this stage.")(fn)
    fn = click.option("--master", help="Spark master URL (default: the pipeline's, e.g. local[2]).")(fn)
    return fn

"""Shared pieces of the CLI: the --source option, pipeline loading, error mapping."""

from __future__ import annotations

import functools
import json

import click

from ..api.source import Source
from ..errors import MinikafkaError


def _row_json(row: tuple, decode) -> str:
    """One stored row as a JSON line: metadata first, then the fields."""
    meta = {"_id": row[0], "_created_at": row[1], "_status": row[2], "_parent_id": row[4]}
    return json.dumps({**meta, **decode(row)}, default=str, ensure_ascii=False)


def status_where(source: Source, layout, which: str | None):
    """(WHERE condition, params, row fixer) for 'new'/'handled'/'all' rows of a topic, as every
    consumer sees them: rows below the partitions' handled positions count as handled."""
    from ..ledger import acks

    conn = source._ledger.conn
    if which in (None, "all"):
        where, params = "1", ()
    elif which == "new":
        where, params = acks.pending_filter(None, layout.name)
    else:
        where, params = acks.done_filter(None, layout.name)
    handled = acks.handled_positions(conn, layout.name)
    at = layout.partition_index

    def fix(row: tuple) -> tuple:
        return (row[0], row[1], acks.status_of(row[2], row[0], row[at], handled), *row[3:])

    return where, params, fix


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


class DefinitionProblem(click.ClickException):
    """A bad pipeline file or selection: exit code 2, like a usage error."""

    exit_code = 2


def _load(pipeline: str):
    from ..pipelines.definition import load_pipeline

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


def _nullcontext():
    import contextlib

    return contextlib.nullcontext()

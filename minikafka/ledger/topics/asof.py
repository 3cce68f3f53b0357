"""Reads as of a snapshot: every topic's high-water mark, and a topic's rows up to one.

A stage's plan takes, in its one transaction, the high-water id of every topic and keyed
table in the file (:func:`high_waters`): the snapshot a stage's context reads through. A
read as of high-water id ``S`` (:func:`where`, :func:`subquery`) holds

- ``which="all"``: every row with id <= ``S`` (a keyed table's versions too);
- ``which="current"`` (keyed tables only): the versions current as of ``S``, each key's
  newest version with id <= ``S``: a version superseded by a version above ``S`` was still
  current then (``"<topic>__superseded"`` holds (id, by), keyed.py).

Rows appended after the snapshot are never read, so every read of one stage sees the same
ledger whatever commits meanwhile. A compaction (``minikafka compact``) removes only
versions superseded and acked by every consumer, and keeps those superseded since the oldest
stage run in progress started (``consuming/table_compaction.py``), so a ``"current"`` read of
a running stage finds every version its snapshot holds.

The conditions hold only integers the ledger produced and validated, quoted names: a reader
that takes SQL text (Spark's JDBC source) gets them as a subquery. Nothing here writes.
"""

from __future__ import annotations

import sqlite3

from ...errors import InvalidSettingError
from .catalog import topic_names
from .identifiers import quote_identifier
from .keyed import superseded_name, table_spec
from .layout import TopicLayout

WHICH = ("all", "current")


def high_waters(conn: sqlite3.Connection) -> dict[str, int]:
    """{topic: its largest id (0 when empty)} of every topic and keyed table in the file, read
    in the caller's transaction (one consistent snapshot)."""
    return {name: conn.execute(f'SELECT coalesce(max("_id"), 0) FROM {quote_identifier(name)}').fetchone()[0]
            for name in topic_names(conn)}


def default_which(conn: sqlite3.Connection, topic: str) -> str:
    """``"current"`` for a keyed table, ``"all"`` for a plain topic."""
    return "current" if table_spec(conn, topic) is not None else "all"


def where(conn: sqlite3.Connection, layout: TopicLayout, upto: int, which: str) -> str:
    """The condition on ``layout``'s table of the rows a read as of ``upto`` covers.

    Raises:
        InvalidSettingError: ``which`` is not "all" or "current", or "current" of a plain topic.
    """
    if which not in WHICH:
        raise InvalidSettingError(f"which must be one of {WHICH}, got {which!r}")
    upto = int(upto)
    cond = f'"_id" <= {upto}'
    if which == "all":
        return cond
    if table_spec(conn, layout.name) is None:
        raise InvalidSettingError(f"topic {layout.name!r} is not a keyed table: which='current' reads a table's "
                                  "current rows; read a topic with which='all'")
    superseded = quote_identifier(superseded_name(layout.name))
    return (f'{cond} AND NOT EXISTS (SELECT 1 FROM {superseded} AS s WHERE s.id = {layout.table}."_id" '
            f'AND s."by" <= {upto})')


def subquery(conn: sqlite3.Connection, layout: TopicLayout, upto: int, which: str) -> str:
    """``(SELECT "_id", <fields> FROM <table> WHERE <where>) AS q``: the rows of a read as of
    ``upto`` in storage form, for Spark's JDBC source (its filters go on the outer query)."""
    fields = "".join(", " + quote_identifier(n) for n in layout.field_names)
    return f'(SELECT "_id"{fields} FROM {layout.table} WHERE {where(conn, layout, upto, which)}) AS q'

"""A stage's lookups: whole topics or keyed tables read in the snapshot of the stage's plan.

A lookup is read whole and never acked (no consumer is registered on it). So that the read
is the very snapshot the plan saw, the plan's transaction fixes each lookup's bounds
(:func:`lookup_bounds`): its high-water id and how many rows the read returns. The read then
takes, whenever Spark runs it:

- a plain topic: every row with ``_id <= upto`` (rows appended after the plan are not seen);
- a keyed table (``keyed.py``): the versions current as of ``upto``: ``_id <= upto`` and not
  superseded by a version ``<= upto`` (``"<topic>__superseded"`` rows with ``by <= upto``), so
  a merge committed after the plan changes nothing the read returns.

What a version superseded after the plan needs is that it is still stored when Spark reads it:
a lookup is no consumer, so ``minikafka compact`` keeps every version superseded since the
oldest stage run in progress started (``consuming/table_compaction.py``).

``(upto, rows)`` with the layout's fingerprint is what a cached copy of the lookup is keyed by
(``spark/stages/lookup.py``): a topic whose rows up to ``upto`` change (retention, compaction) has
another count. The conditions hold only integers the ledger produced and validated names.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from . import keyed
from .identifiers import quote_identifier
from .layout import TopicLayout


@dataclass(frozen=True)
class LookupBounds:
    """What a lookup read covers: ids up to ``upto``, ``rows`` rows, the current versions of a
    keyed table (``table``) or every row of a plain topic."""

    topic: str
    upto: int
    rows: int
    table: bool
    where: str  # holds only integers the ledger produced and validated names


def lookup_bounds(conn: sqlite3.Connection, layout: TopicLayout) -> LookupBounds:
    """Fix a lookup's bounds (call inside the plan's transaction)."""
    upto = int(conn.execute(f'SELECT coalesce(max("_id"), 0) FROM {layout.table}').fetchone()[0])
    is_table = keyed.table_spec(conn, layout.name) is not None
    where = f'"_id" <= {upto}'
    if is_table:
        superseded = quote_identifier(keyed.superseded_name(layout.name))
        where += f' AND "_id" NOT IN (SELECT id FROM {superseded} WHERE by <= {upto})'
    # a topic's rows up to its highest id are all its rows, in this transaction: counted on its
    # smallest index, not by walking the table's rows (1,000,000 rows: 7 ms against 50 ms)
    counted = where if is_table else "1"
    rows = int(conn.execute(f"SELECT count(*) FROM {layout.table} WHERE {counted}").fetchone()[0])
    return LookupBounds(layout.name, upto, rows, is_table, where)


def lookup_subquery(layout: TopicLayout, bounds: LookupBounds) -> str:
    """The lookup's rows as an aliased subquery, ``(SELECT ...) AS q``, for Spark's JDBC
    source: ``_id`` (for id-range splits, dropped by the reader) and the model's fields."""
    fields = ", ".join(quote_identifier(n) for n in layout.field_names)
    return f'(SELECT "_id", {fields} FROM {layout.table} WHERE {bounds.where}) AS q'

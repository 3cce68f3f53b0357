"""The rows a lake table copies from its topic: their Arrow schema and how they are read.

Shared by the Iceberg and Delta targets: ``_id`` (the topic's offset) then each field, types
exact (``arrow_schema``); the rows above an id read in batches and converted by column
(``arrow_rows``, ``arrow_batches``), or converted from the staged batches a commit stored
whole and in order (``staged_arrow_batch``: the same rows without reading them back); what
one sync wrote (``SyncResult``). Crash contract: reads only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...util.optional import require
from ..topics.arrow import arrow_type
from ..topics.layout import TopicLayout
from ..topics.table import TopicTable

FETCH_ROWS = 65_536


@dataclass
class SyncResult:
    """What one sync wrote: rows, the new snapshot (None: nothing new), the highest row id held."""

    target: str
    rows: int
    snapshot_id: int | None
    last_id: int
    data_files: int = 0
    read_back: bool | None = None  # rows read back from the topic (False: from the commit's insert; None: n/a)


def arrow_schema(layout: TopicLayout) -> Any:
    """The Arrow schema of the rows a sync appends (what pyiceberg checks against the table's)."""
    pa = require("pyarrow", "lake")
    fields = [pa.field("_id", pa.int64(), nullable=False)]
    for col in layout.columns:
        fields.append(pa.field(col.name, arrow_type(pa, col) or pa.string(), nullable=col.nullable))
    return pa.schema(fields)


def arrow_rows(conn: sqlite3.Connection, layout: TopicLayout, after: int, upto: int, schema) -> Any:
    """The topic's rows in ``(after, upto]`` as an Arrow table of ``schema``, converted by column
    (storage text to timestamps, dates and decimals by Arrow's casts, not per value)."""
    pa = require("pyarrow", "lake")
    return pa.Table.from_batches(list(arrow_batches(conn, layout, after, upto, schema)), schema=schema)


def arrow_batches(conn: sqlite3.Connection, layout: TopicLayout, after: int, upto: int, schema) -> Iterator[Any]:
    """:func:`arrow_rows` a record batch at a time (``FETCH_ROWS`` rows each), in id order."""
    pa = require("pyarrow", "lake")
    for rows in TopicTable(conn, layout).field_rows(after, upto, FETCH_ROWS):
        columns = list(zip(*rows))
        arrays = [pa.array(columns[0], pa.int64())]
        for i, col in enumerate(layout.columns, start=1):
            values, typ = columns[i], schema.field(col.name).type
            if col.kind in ("datetime", "date", "decimal"):
                arrays.append(pa.array(values, pa.string()).cast(typ))
            elif col.kind == "bool":
                arrays.append(pa.array(values, pa.int64()).cast(typ))
            else:
                arrays.append(pa.array(values, typ))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _storage_fits(pa, col, typ) -> bool:
    """Whether staged values of Arrow type ``typ`` are stored as themselves in ``col``'s
    SQLite column (STRICT), so converting them here gives what :func:`arrow_batches` reads back."""
    kind = col.kind
    if col.sql_type == "TEXT":
        return pa.types.is_string(typ) or pa.types.is_large_string(typ)
    if col.sql_type == "BLOB":
        return pa.types.is_binary(typ) or pa.types.is_large_binary(typ)
    if col.sql_type == "REAL":
        return kind == "float" and pa.types.is_floating(typ)
    if col.sql_type == "INTEGER":
        if kind == "bool" and pa.types.is_boolean(typ):
            return True
        return pa.types.is_integer(typ) and not pa.types.is_uint64(typ)
    return False


def staged_arrow_batch(layout: TopicLayout, schema, batch, first_id: int) -> Any | None:
    """The lake rows of a staged batch of storage values that a commit stored whole and in
    order, its first row under id ``first_id``: what :func:`arrow_batches` would read back for
    ids ``first_id ..``, without reading them. Each column is converted as ``arrow_batches``
    converts the stored values, from the staged values SQLite stored as they are (text in
    TEXT, integers in INTEGER, floats in REAL with a NaN stored as NULL and -0.0 as 0.0,
    binary in BLOB). None when a column's Arrow type is not one SQLite stores unchanged
    (the rows are then read back)."""
    pa = require("pyarrow", "lake")
    pc = require("pyarrow.compute", "lake")
    import numpy as np

    names = batch.schema.names
    n = batch.num_rows
    arrays = [pa.array(np.arange(first_id, first_id + n, dtype=np.int64))]
    for col in layout.columns:
        if col.name not in names:
            return None
        values, typ = batch.column(col.name), schema.field(col.name).type
        if not _storage_fits(pa, col, values.type):
            return None
        if col.kind in ("datetime", "date", "decimal"):
            arrays.append(values.cast(pa.string()).cast(typ))
        elif col.kind == "bool":
            arrays.append(values.cast(pa.int64()).cast(typ))
        elif col.sql_type == "REAL":
            values = values.cast(pa.float64())
            values = pc.if_else(pc.is_nan(values), pa.scalar(None, pa.float64()), pc.add(values, 0.0))
            arrays.append(values.cast(typ))
        else:
            arrays.append(values.cast(typ))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)

"""The rows a lake table copies from its topic: their Arrow schema and how they are read.

Shared by the Iceberg and Delta targets: ``_id`` (the topic's offset) then each field, types
exact (``arrow_schema``); the rows above an id read in batches and converted by column
(``arrow_rows``); what one sync wrote (``SyncResult``). Crash contract: reads only.
"""

from __future__ import annotations

import sqlite3
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
    batches = []
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
        batches.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
    return pa.Table.from_batches(batches, schema=schema)

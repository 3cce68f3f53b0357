"""Stored rows of a topic as an Arrow table (pyarrow imported only here)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...util.clock import parse_timestamp
from ...util.optional import require
from .columns import decimal_layout
from .layout import TopicLayout


def arrow_type(pa, col) -> Any:
    """The Arrow type of a column (None: let Arrow infer it from the values)."""
    kind = col.kind
    if kind == "int" or (kind == "enum" and col.sql_type == "INTEGER"):
        return pa.int64()
    if kind == "float":
        return pa.float64()
    if kind in ("str", "text") or kind == "enum":
        return pa.string()
    if kind == "bool":
        return pa.bool_()
    if kind == "datetime":
        return pa.timestamp("us", tz="UTC")
    if kind == "date":
        return pa.date32()
    if kind == "decimal":  # the layout append checks values against (see columns.decimal_layout)
        return pa.decimal128(*decimal_layout(col.max_digits, col.decimal_places))
    if kind == "bytes":
        return pa.binary()
    return None


def rows_to_arrow(layout: TopicLayout, rows: Iterable[tuple], decode) -> Any:
    """Build a pyarrow Table: metadata columns (id, times, status, lineage) then fields."""
    pa = require("pyarrow", "arrow")
    meta: dict[str, list] = {k: [] for k in ("_id", "_created_at", "_status", "_handled_at",
                                            "_parent_id", "_parent_topic", "_run_id")}
    fields: dict[str, list] = {c.name: [] for c in layout.columns}
    meta_keys = list(meta)
    enums = {c.name for c in layout.columns if c.kind == "enum"}
    for row in rows:
        for i, key in enumerate(meta_keys):
            meta[key].append(row[i])
        for name, value in decode(row).items():
            fields[name].append(value.value if name in enums and hasattr(value, "value") else value)
    ts = pa.timestamp("us", tz="UTC")
    arrays = {
        "_id": pa.array(meta["_id"], pa.int64()),
        "_created_at": pa.array([parse_timestamp(v) for v in meta["_created_at"]], ts),
        "_status": pa.array(meta["_status"], pa.string()),
        "_handled_at": pa.array([parse_timestamp(v) for v in meta["_handled_at"]], ts),
        "_parent_id": pa.array(meta["_parent_id"], pa.int64()),
        "_parent_topic": pa.array(meta["_parent_topic"], pa.string()),
        "_run_id": pa.array(meta["_run_id"], pa.string()),
    }
    for col in layout.columns:
        values = fields[col.name]
        typ = arrow_type(pa, col)
        if typ is None:
            try:
                arrays[col.name] = pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                import json

                arrays[col.name] = pa.array(
                    [None if v is None else json.dumps(v) for v in values], pa.string()
                )
        elif col.kind == "decimal":
            try:
                arrays[col.name] = pa.array(values, typ)
            except pa.ArrowInvalid:  # a value stored before append checked the layout: let Arrow size it
                arrays[col.name] = pa.array(values)
        else:
            arrays[col.name] = pa.array(values, typ)
    return pa.table(arrays)

"""Spark types of ledger columns, both ways.

Reading: JDBC returns each column in its *storage* form, pinned by a generated
``customSchema`` (without it Spark maps SQLite INTEGER to a 32-bit int and corrupts
values above 2^31). ``to_model_columns`` then turns storage into model types:
timestamp text -> TimestampType, date text -> DateType, decimal text -> DecimalType,
JSON text -> structs/arrays/maps.

Writing: ``to_storage_columns`` does the inverse on a stage's output so the commit
step stores exactly what the pure-Python path would.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..ledger.topics import ColumnSpec, TopicLayout, decimal_layout

TIMESTAMP_READ = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSX"
TIMESTAMP_WRITE = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"

META_STORAGE = [
    ("_id", "BIGINT"), ("_created_at", "STRING"), ("_status", "STRING"), ("_handled_at", "STRING"),
    ("_parent_id", "BIGINT"), ("_parent_topic", "STRING"), ("_run_id", "STRING"),
]


def storage_sql_type(col: ColumnSpec) -> str:
    """The Spark SQL type JDBC must use to read the column's stored value exactly."""
    if col.sql_type == "INTEGER":
        return "BOOLEAN" if col.kind == "bool" else "BIGINT"
    if col.sql_type == "REAL":
        return "DOUBLE"
    if col.sql_type == "BLOB":
        return "BINARY"
    return "STRING"


def custom_schema(layout: TopicLayout, *, metadata: bool = True) -> str:
    """The JDBC ``customSchema`` option for a topic table."""
    parts = [f"{quote_back(n)} {t}" for n, t in META_STORAGE] if metadata else []
    parts += [f"{quote_back(c.name)} {storage_sql_type(c)}" for c in layout.columns]
    return ", ".join(parts)


def decimal_type(col: ColumnSpec) -> T.DecimalType:
    """The column's decimal(P, S), the same layout Arrow uses and append checks values against."""
    return T.DecimalType(*decimal_layout(col.max_digits, col.decimal_places))


def json_to_spark(schema: dict, defs: dict | None = None) -> T.DataType | None:
    """Spark type of a pydantic JSON schema (None when it has no faithful Spark type)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return json_to_spark(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return json_to_spark(options[0], defs) if len(options) == 1 else None
    if "enum" in schema:
        values = schema["enum"]
        if all(isinstance(v, str) for v in values):
            return T.StringType()
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return T.LongType()
        return None
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties")
        if props:
            required = set(schema.get("required", []))
            fields = []
            for name, sub in props.items():
                sub_type = json_to_spark(sub, defs)
                if sub_type is None:
                    return None
                fields.append(T.StructField(name, sub_type, nullable=name not in required or _nullable(sub)))
            return T.StructType(fields)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            value = json_to_spark(extra, defs)
            return None if value is None else T.MapType(T.StringType(), value, True)
        return None
    if kind == "array":
        if "prefixItems" in schema or "items" not in schema:
            return None
        item = json_to_spark(schema["items"], defs)
        return None if item is None else T.ArrayType(item, True)
    return {"integer": T.LongType(), "number": T.DoubleType(), "string": T.StringType(),
            "boolean": T.BooleanType()}.get(kind)


def _nullable(schema: dict) -> bool:
    return any(s.get("type") == "null" for s in schema.get("anyOf", []))


def model_type(col: ColumnSpec) -> T.DataType:
    """The Spark type a stage sees (and must produce) for a column."""
    kind = col.kind
    if kind == "int" or (kind == "enum" and col.sql_type == "INTEGER"):
        return T.LongType()
    if kind == "float":
        return T.DoubleType()
    if kind == "bool":
        return T.BooleanType()
    if kind == "datetime":
        return T.TimestampType()
    if kind == "date":
        return T.DateType()
    if kind == "decimal":
        return decimal_type(col)
    if kind == "bytes":
        return T.BinaryType()
    if kind == "json":
        return json_to_spark(col.json_schema or {}) or T.StringType()
    return T.StringType()


def to_model_column(col: ColumnSpec, c: Column) -> Column:
    kind = col.kind
    if kind == "datetime":
        return F.to_timestamp(c, TIMESTAMP_READ)
    if kind == "date":
        return F.to_date(c, "yyyy-MM-dd")
    if kind == "decimal":
        return c.cast(decimal_type(col))
    if kind == "json":
        target = model_type(col)
        return c if isinstance(target, T.StringType) else F.from_json(c, target, {"mode": "FAILFAST"})
    return c


def to_model_columns(df: DataFrame, layout: TopicLayout) -> DataFrame:
    """Convert the stored forms JDBC returned into model types (metadata columns kept)."""
    out = []
    fields = set(layout.field_names)
    for name in df.columns:
        if name in fields:
            out.append(to_model_column(layout.column(name), F.col(quote_back(name))).alias(name))
        elif name in ("_created_at", "_handled_at"):
            out.append(F.to_timestamp(F.col(name), TIMESTAMP_READ).alias(name))
        else:
            out.append(F.col(quote_back(name)))
    return df.select(*out)


def quote_back(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def to_storage_column(col: ColumnSpec, c: Column) -> Column:
    kind = col.kind
    if kind == "datetime":
        return F.date_format(c, TIMESTAMP_WRITE)
    if kind == "date":
        return F.date_format(c, "yyyy-MM-dd")
    if kind == "decimal":
        return c.cast("string")
    return c


def storage_arrow_fields(layout: TopicLayout) -> list[tuple[str, Any]]:
    """Names and Spark storage types of the columns the commit step inserts."""
    mapping = {"BIGINT": T.LongType(), "DOUBLE": T.DoubleType(), "STRING": T.StringType(),
               "BINARY": T.BinaryType(), "BOOLEAN": T.BooleanType()}
    return [(c.name, mapping[storage_sql_type(c)]) for c in layout.columns]


def arrow_type(dt: T.DataType):
    """The Arrow type of a storage-form Spark type (the columns ``storage_arrow_fields`` gives)."""
    import pyarrow as pa

    return {
        T.LongType: pa.int64(), T.DoubleType: pa.float64(), T.StringType: pa.string(),
        T.BinaryType: pa.binary(), T.BooleanType: pa.bool_(),
    }[type(dt)]

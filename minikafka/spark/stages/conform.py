"""Check and convert a stage's output DataFrame to a target topic's storage form.

A row holding a value the ledger refuses at append (NaN in a float column, NaN or
infinity inside a JSON column, a decimal outside its column's decimal(P, S)) gets the
reason in ``_mk_error`` (same wording as ``topic.append``'s InvalidRecordError) and the
row as JSON in ``_mk_payload``: the commit leaves it out and quarantines it.
"""

from __future__ import annotations

from itertools import repeat

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...errors import OutputSchemaError
from ...ledger.topics import (
    FLOAT_NAN_REFUSED,
    JSON_NON_FINITE_REFUSED,
    TopicLayout,
    decimal_layout,
    decimal_refusal,
    key_path,
)
from ..types import model_type, quote_back, storage_sql_type, to_storage_column
from .rowfn import ERROR

PAYLOAD = "_mk_payload"
IDENTIFIER = "^[A-Za-z_][A-Za-z0-9_]*$"

WIDENING = {
    T.LongType: (T.IntegerType, T.ShortType, T.ByteType),
    T.DoubleType: (T.FloatType, T.IntegerType, T.LongType, T.ShortType, T.ByteType),
    T.DecimalType: (T.DecimalType, T.IntegerType, T.LongType),
    T.TimestampType: (T.TimestampNTZType, T.DateType),
}


def _fits(actual: T.DataType, wanted: T.DataType) -> str:
    """'same', 'cast' or 'no'."""
    if actual == wanted:
        return "same"
    if isinstance(wanted, T.DecimalType) and isinstance(actual, T.DecimalType):
        return "cast"
    if isinstance(actual, tuple(WIDENING.get(type(wanted), ()))):
        return "cast"
    return "no"


def conform(df: DataFrame, layout: TopicLayout, *, stage: str) -> DataFrame:
    """Select the target's fields in storage form, plus ``_parent_id``.

    ``_parent_id`` comes from the input's ``_id`` when the transform kept it.

    Raises:
        OutputSchemaError: a missing field, an unexpected column or a type that does not fit.
    """
    fields = layout.field_names
    columns = {f.name: f.dataType for f in df.schema.fields}
    missing = [c.name for c in layout.columns if c.name not in columns and not c.nullable]
    if missing:
        raise OutputSchemaError(
            f"stage {stage!r}: output for topic {layout.name!r} lacks column(s) {missing!r} "
            f"(output columns: {sorted(columns)!r})"
        )
    extra = sorted(n for n in columns if n not in fields and not n.startswith("_"))
    if extra:
        raise OutputSchemaError(
            f"stage {stage!r}: output for topic {layout.name!r} has column(s) {extra!r} that are not fields "
            f"of its model (fields: {fields!r}); select or drop them in the transform"
        )
    out = []
    refusals: list[Column] = []
    for col in layout.columns:
        if col.name not in columns:
            out.append(F.lit(None).cast(storage_sql_type(col)).alias(col.name))
            continue
        c = F.col(quote_back(col.name))
        actual, wanted = columns[col.name], model_type(col)
        prefix = f"topic {layout.name!r}, field {col.name!r}: "
        if col.kind == "json":
            if isinstance(actual, (T.StructType, T.ArrayType, T.MapType)):
                found = _non_finite(c, actual)
                if found is not None:
                    refusals.append(F.concat(F.lit(prefix + col.name), found, F.lit(": " + JSON_NON_FINITE_REFUSED)))
                out.append(F.to_json(c, {"ignoreNullFields": "false"}).alias(col.name))
                continue
            if isinstance(actual, T.StringType):
                out.append(c.alias(col.name))
                continue
        fit = _fits(actual, wanted)
        if fit == "no":
            raise OutputSchemaError(
                f"stage {stage!r}: column {col.name!r} of the output for topic {layout.name!r} has type "
                f"{actual.simpleString()}, the topic expects {wanted.simpleString()}"
            )
        if col.kind == "decimal":
            refusals.append(_decimal_refusal(c, col, prefix))
            if fit == "cast":
                c = c.try_cast(wanted)  # a value that does not fit is refused above, not a failed job
        elif fit == "cast":
            c = c.cast(wanted)
        if col.kind == "float" and isinstance(actual, (T.DoubleType, T.FloatType)):
            refusals.append(F.when(F.isnan(c), F.lit(f"{prefix}value NaN: {FLOAT_NAN_REFUSED}")))
        out.append(to_storage_column(col, c).alias(col.name))
    if refusals:
        reason = F.coalesce(*refusals)
        present = [F.col(quote_back(c.name)) for c in layout.columns if c.name in columns]
        out += [reason.alias(ERROR), F.when(reason.isNotNull(), F.to_json(F.struct(*present))).alias(PAYLOAD)]
    if "_id" in columns:
        out.append(F.col("_id").cast("long").alias("_parent_id"))
    elif "_parent_id" in columns:
        out.append(F.col("_parent_id").cast("long").alias("_parent_id"))
    else:
        out.append(F.lit(None).cast("long").alias("_parent_id"))
    # Duplicates (inside the batch and against the target) are dropped by the target's
    # unique dedup index at commit, which keeps the first row inserted. Sorting each
    # partition by parent id makes that the earliest source row for any transform that
    # keeps the id-range partitioning of the read (no shuffle needed for it).
    return df.select(*out).sortWithinPartitions("_parent_id")


def _has_float(dtype: T.DataType) -> bool:
    if isinstance(dtype, (T.DoubleType, T.FloatType)):
        return True
    if isinstance(dtype, T.ArrayType):
        return _has_float(dtype.elementType)
    if isinstance(dtype, T.MapType):
        return _has_float(dtype.valueType)
    if isinstance(dtype, T.StructType):
        return any(_has_float(f.dataType) for f in dtype.fields)
    return False


def _key_path(key: Column) -> Column:
    """``.key``, or ``["key"]`` for a key that is not an identifier (as ``columns.find_non_finite`` writes)."""
    return F.when(key.rlike(IDENTIFIER), F.concat(F.lit("."), key)).otherwise(F.to_json(F.array(key)))


def _first(items: Column) -> Column:
    return F.try_element_at(F.filter(items, lambda p: p.isNotNull()), F.lit(1))


def _non_finite(c: Column, dtype: T.DataType) -> Column | None:
    """Where the first NaN or infinity inside ``c`` is, as ``<path> is <value>`` relative to ``c``
    (null when there is none); None when ``dtype`` holds no floats at all."""
    if not _has_float(dtype):
        return None
    if isinstance(dtype, (T.DoubleType, T.FloatType)):
        return F.when(F.isnan(c) | (F.abs(c) == F.lit(float("inf"))), F.concat(F.lit(" is "), c.cast("string")))
    if isinstance(dtype, T.ArrayType):
        element = dtype.elementType
        return _first(F.transform(c, lambda x, i: F.concat(
            F.lit("["), i.cast("string"), F.lit("]"), _non_finite(x, element))))
    if isinstance(dtype, T.MapType):
        value = dtype.valueType
        return _first(F.transform(F.map_entries(c), lambda e: F.concat(
            _key_path(e.getField("key").cast("string")), _non_finite(e.getField("value"), value))))
    parts = []
    for f in dtype.fields:  # a struct
        inner = _non_finite(c.getField(f.name), f.dataType)
        if inner is not None:
            parts.append(F.concat(F.lit(key_path(f.name)), inner))
    return F.coalesce(*parts)


def _decimal_refusal(c: Column, col, prefix: str) -> Column:
    precision, scale = decimal_layout(col.max_digits, col.decimal_places)
    fitted = c.try_cast(T.DecimalType(precision, scale))
    before, after = decimal_refusal("\0", precision, scale).split("\0")
    return F.when(c.isNotNull() & (fitted.isNull() | (fitted != c)),
                  F.concat(F.lit(prefix + before), c.cast("string"), F.lit(after)))


def refused_rows(dataset, topic: str) -> list[tuple]:
    """(topic, parent id, payload, reason) of the staged rows ``conform`` marked as refused."""
    import pyarrow.compute as pc

    if ERROR not in dataset.schema.names or PAYLOAD not in dataset.schema.names:
        return []
    table = dataset.to_table(columns=["_parent_id", PAYLOAD, ERROR], filter=pc.field(ERROR).is_valid())
    return list(zip(repeat(topic), table.column("_parent_id").to_pylist(), table.column(PAYLOAD).to_pylist(),
                    table.column(ERROR).to_pylist()))

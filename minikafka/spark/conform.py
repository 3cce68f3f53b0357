"""Check and convert a stage's output DataFrame to a target topic's storage form."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import MinikafkaError
from ..ledger.layout import TopicLayout
from .types import model_type, quote_back, storage_sql_type, to_storage_column

WIDENING = {
    T.LongType: (T.IntegerType, T.ShortType, T.ByteType),
    T.DoubleType: (T.FloatType, T.IntegerType, T.LongType, T.ShortType, T.ByteType),
    T.DecimalType: (T.DecimalType, T.IntegerType, T.LongType),
    T.TimestampType: (T.TimestampNTZType, T.DateType),
}


class OutputSchemaError(MinikafkaError):
    """A stage's output does not fit its target topic (names stage, topic, column)."""


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
    for col in layout.columns:
        if col.name not in columns:
            out.append(F.lit(None).cast(storage_sql_type(col)).alias(col.name))
            continue
        c = F.col(quote_back(col.name))
        actual, wanted = columns[col.name], model_type(col)
        if col.kind == "json":
            if isinstance(actual, (T.StructType, T.ArrayType, T.MapType)):
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
        if fit == "cast":
            c = c.cast(wanted)
        out.append(to_storage_column(col, c).alias(col.name))
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


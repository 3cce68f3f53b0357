"""Per-row Python functions on the executors (the "call a local LLM per item" step).

Rows are validated into the input model, passed to the function, and its outputs
validated and encoded with the same column encoders as the pure-Python path, so a
row stored by this path is byte-for-byte what ``topic.append`` would store. A row
whose function raises yields an error row (``_mk_error``) instead of outputs.
"""

from __future__ import annotations

import traceback

import pyarrow as pa
from pydantic import BaseModel
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ...ledger.topics import TopicLayout
from ...util.redact import redact_and_cut
from ..types import arrow_type, storage_arrow_fields

ERROR = "_mk_error"


def output_schema(layout: TopicLayout) -> T.StructType:
    fields = [T.StructField(name, typ, True) for name, typ in storage_arrow_fields(layout)]
    fields += [T.StructField("_parent_id", T.LongType(), True), T.StructField(ERROR, T.StringType(), True)]
    return T.StructType(fields)


def apply_row_function(df: DataFrame, fn, in_model: type[BaseModel], out_model: type[BaseModel],
                       layout: TopicLayout) -> DataFrame:
    """Run ``fn`` on every row of ``df`` on the executors; returns staged rows and error rows."""
    fields = list(in_model.model_fields)
    out_names = layout.field_names
    name, dedup = layout.name, layout.dedup
    schema = output_schema(layout)

    def mapper(batches):
        encode = TopicLayout.for_model(name, out_model, dedup).encoder()
        arrow_schema = pa.schema([
            pa.field(f.name, arrow_type(f.dataType)) for f in schema.fields
        ])
        for batch in batches:
            columns: dict[str, list] = {n: [] for n in arrow_schema.names}
            for row in batch.to_pylist():
                parent = row["_id"]
                try:
                    data = in_model.model_validate({k: row[k] for k in fields})
                    result = fn(data)
                    outputs = [] if result is None else (result if isinstance(result, list) else [result])
                    encoded = []
                    for item in outputs:
                        if not isinstance(item, out_model):
                            item = out_model.model_validate(item.model_dump() if isinstance(item, BaseModel) else item)
                        encoded.append(encode(item))
                except Exception as exc:  # the row's failure is data, reported at commit
                    _append(columns, out_names, None, parent, _describe(exc))
                    continue
                for values in encoded:
                    _append(columns, out_names, values, parent, None)
            yield pa.RecordBatch.from_pydict(columns, schema=arrow_schema)

    return df.mapInArrow(mapper, schema)


def _append(columns: dict, names: list[str], values, parent, error) -> None:
    for i, n in enumerate(names):
        columns[n].append(None if values is None else values[i])
    columns["_parent_id"].append(parent)
    columns[ERROR].append(error)


def _describe(exc: BaseException) -> str:
    tail = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return redact_and_cut(tail, 2000)  # masked, then cut: it becomes a quarantine reason

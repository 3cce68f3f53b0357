"""Backfill's Python engine for CSV and Parquet dumps: the raw rows Spark's readers give
(``backfill._read``), read in this process, for ``RowChecker`` to validate exactly as on the
executors. No JVM: a small dump loads in well under the time a JVM takes to start.

CSV as Spark reads it with backfill's options (``multiLine``, the quote doubled as its own
escape, ``PERMISSIVE`` with a corrupt-record column): a record is one line or, inside
quotes, several; an empty unquoted field is null, an empty quoted one ``CSV_EMPTY``; a record
whose field count is not the header's is malformed, its text in ``_mk_text``; blank lines
are skipped; the header (when there is one) is the first record. ``_mk_line`` is the line
the record starts at (what ``csv_line_map`` maps Spark's record numbers to).

Parquet: the file's rows in order, ``_mk_line`` their position from 1, timestamps in
microseconds (Spark's precision).
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from ...util import dumpfiles
from .rowcheck import CSV_EMPTY


def csv_batches(path: Path, columns: list[str], *, delimiter: str, quote: str, header: bool, file_name: str,
                batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The CSV file's records as Arrow batches of text columns (``columns``), ``_mk_text``,
    ``_mk_file`` and ``_mk_line``, at most ``batch_rows`` records each, in file order."""
    csv.field_size_limit(max(csv.field_size_limit(), min(sys.maxsize, 2**31 - 1)))
    names = list(columns)
    schema = pa.schema([*(pa.field(n, pa.string()) for n in names), pa.field("_mk_text", pa.string()),
                        pa.field("_mk_file", pa.string()), pa.field("_mk_line", pa.int64())])
    rows: list[tuple] = []
    with dumpfiles.open_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
        for line, fields, record in _records(text, delimiter, quote):
            if header:
                header = False
                continue
            if len(fields) != len(names):
                rows.append((*([None] * len(names)), record, file_name, line))
            else:
                rows.append((*fields, None, file_name, line))
            if len(rows) >= batch_rows:
                yield _batch(rows, schema)
                rows = []
    if rows:
        yield _batch(rows, schema)


def _batch(rows: list[tuple], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(list(col), type=f.type) for col, f in zip(zip(*rows), schema)],
                                      schema=schema)


def _records(text, delimiter: str, quote: str) -> Iterator[tuple[int, list, str]]:
    """(first line, fields, record text) of each non-blank record. A field is None when it is
    empty and unquoted, ``CSV_EMPTY`` when it is ``""``."""
    lines = iter(text)
    number = 0
    for first in lines:
        number += 1
        start = number
        record = first
        while quote in record and _open_quote(record, delimiter, quote):  # a quoted field runs on over the break
            more = next(lines, None)
            if more is None:
                break
            number += 1
            record += more
        body = record.rstrip("\r\n")
        if not body:
            continue  # a blank line: Spark skips it
        yield start, _fields(body, delimiter, quote), body


def _open_quote(record: str, delimiter: str, quote: str) -> bool:
    """Whether ``record`` ends inside a quoted field (one that starts with the quote character;
    a quote inside an unquoted field is a plain character)."""
    i, n = 0, len(record)
    while i < n:
        if record[i] == quote:  # a quoted field: to its closing quote ("" inside is one quote)
            i += 1
            while True:
                j = record.find(quote, i)
                if j < 0:
                    return True
                if record.startswith(quote, j + 1):
                    i = j + 2
                    continue
                i = j + 1
                break
        cut = record.find(delimiter, i)
        if cut < 0:
            return False
        i = cut + 1
    return False


def _fields(body: str, delimiter: str, quote: str) -> list:
    """The record's fields: Python's CSV reader splits them; an empty field is told quoted or
    not by the record's own text (only when the record has one)."""
    fields = next(csv.reader([body], delimiter=delimiter, quotechar=quote, doublequote=True, strict=False), [])
    if "" not in fields:
        return fields
    if quote * 2 not in body:
        return [None if f == "" else f for f in fields]
    return [None if f == "" and not q else (CSV_EMPTY if f == "" else f)
            for f, q in zip(fields, _quoted(body, delimiter, quote))]


def _quoted(body: str, delimiter: str, quote: str) -> list[bool]:
    """For each field of the record, whether it starts with the quote character."""
    out: list[bool] = []
    i, n = 0, len(body)
    while True:
        if i < n and body[i] == quote:
            out.append(True)
            i += 1
            while i < n:  # to the closing quote ("" inside is one quote)
                if body[i] == quote:
                    if i + 1 < n and body[i + 1] == quote:
                        i += 2
                        continue
                    i += 1
                    break
                i += 1
        else:
            out.append(False)
        cut = body.find(delimiter, i)
        if cut < 0:
            return out
        i = cut + 1


def parquet_batches(path: Path, *, file_name: str, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The Parquet file's rows with ``_mk_file`` and ``_mk_line`` (position from 1), in order."""
    import pyarrow.parquet as pq

    from ...errors import BackfillError

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow's ArrowInvalid and OSError alike
        raise BackfillError(f"{path}: cannot read it as Parquet: {exc}") from exc
    line = 1
    for batch in pf.iter_batches(batch_size=batch_rows, use_threads=False):
        batch = _microseconds(batch)
        n = batch.num_rows
        batch = batch.append_column("_mk_file", pa.array([file_name] * n, pa.string()))
        batch = batch.append_column("_mk_line", pa.array(range(line, line + n), pa.int64()))
        line += n
        yield batch


def _microseconds(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Nanosecond timestamps as microseconds (Spark's precision; the digits below are cut)."""
    fields = [f.with_type(pa.timestamp("us", f.type.tz)) if pa.types.is_timestamp(f.type) and f.type.unit == "ns"
              else f for f in batch.schema]
    if all(f.type == g.type for f, g in zip(fields, batch.schema)):
        return batch
    return pa.RecordBatch.from_arrays([c.cast(f.type, safe=False) for c, f in zip(batch.columns, fields)],
                                      schema=pa.schema(fields))

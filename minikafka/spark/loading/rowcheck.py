"""Rows of a dump -> storage values, or the reason a row is refused, exactly as ``ingest``
decides (backfill: on the executors, and for the JSONL lines the fast validator refused)."""

from __future__ import annotations

import json

import pyarrow as pa
from pydantic import BaseModel

from ...ledger.topics import TopicLayout
from ...util import dumpfiles
from ...util.gcpause import gc_paused
from ..types import arrow_type, storage_arrow_fields

CSV_EMPTY = "\x00minikafka:empty\x00"  # what Spark reads an empty quoted field ("") as


def _csv_value(value: str | None, nullable: bool) -> str | None:
    """A CSV field as the model sees it: an empty quoted field is "", an empty unquoted one
    None for a field that may be None (``str | None``, ``int | None``...) and "" otherwise."""
    if value is None:
        return None if nullable else ""
    return "" if value == CSV_EMPTY else value


def malformed_csv_reason(text: str, *, expected: int, delimiter: str, quote: str) -> str:
    """Why Spark could not split a CSV record into the header's columns."""
    import csv

    if text.count(quote) % 2:
        return ("malformed CSV row: a quoted field is never closed (the record runs on to the end of the file "
                "or to the next quote character)")
    found = len(next(csv.reader([text], delimiter=delimiter, quotechar=quote, doublequote=True), []))
    return f"malformed CSV row: {found} column{'s' if found != 1 else ''} where {expected} are expected"


def map_line(points: list[tuple[int, int]], line: int) -> int:
    """Spark's record number -> the record's first line in the file (see :func:`csv_line_map`)."""
    import bisect

    i = bisect.bisect_right(points, (line, float("inf"))) - 1
    return line + points[i][1] if i >= 0 else line


class RowChecker:
    """Rows -> storage values, or an error with the raw row (Arrow batches in and out).

    Each batch is parsed row by row (cheap), validated in one pydantic call, and only
    the rows pydantic names as failing are set aside; the rest are re-validated together.

    ``csv_opts``: ``columns``, ``delimiter``, ``quote`` and ``lines`` (:func:`csv_line_map`).

    Runs on the executors: ``mapper`` in a ``mapInArrow`` (CSV, Parquet), or ``validate``
    for the lines of a JSONL chunk that pydantic-core's JSON validator refused
    (``jsonlparts``). The output stays in line order.
    """

    def __init__(self, model: type[BaseModel], layout: TopicLayout, fmt: str, nullable: set[str],
                 csv_opts: dict | None = None):
        self.model, self.layout, self.fmt, self.nullable, self.csv_opts = model, layout, fmt, nullable, csv_opts
        self.rows = dumpfiles.dump_format(fmt).rows  # an unknown format is refused by name
        self._tools = None

    def __getstate__(self):
        return {**self.__dict__, "_tools": None}  # the encoder and adapter are built where it runs

    def tools(self):
        if self._tools is None:
            from pydantic import TypeAdapter

            from ...ledger.topics import TopicLayout as Layout

            out_fields = storage_arrow_fields(self.layout)
            self._tools = (Layout.for_model(self.layout.name, self.model, self.layout.dedup).encoder(),
                           TypeAdapter(list[self.model]), out_fields, _arrow_schema(out_fields))
        return self._tools

    def mapper(self, batches):
        """The mapInArrow function."""
        for batch in batches:
            with gc_paused():
                yield self.validate(batch)

    def parse(self, row: dict):
        """(data, raw text for the quarantine) or raises with the row's reason."""
        text = row.pop("_mk_text", None)
        if self.rows == "json":
            if text is None or not text.strip():
                return None, None
            decoded, problem = dumpfiles.decode_line(text)
            if problem is None:
                data, problem = dumpfiles.parse_json_object(decoded)
            if problem is not None:
                raise ValueError(problem)
            return data, decoded
        if self.rows == "csv":
            opts = self.csv_opts
            if text is not None:
                raise ValueError(malformed_csv_reason(text, expected=len(opts["columns"]),
                                                      delimiter=opts["delimiter"], quote=opts["quote"]))
            data = {k: _csv_value(v, k in self.nullable) for k, v in row.items()}
            return data, data
        return row, row

    def validate(self, batch):
        """The batch's rows as one Arrow batch of storage values (or error and payload), in order."""
        _encode, _adapter, out_fields, schema = self.tools()
        cols: dict[str, list] = {n: [] for n, _ in out_fields}
        meta = {"_mk_file": [], "_mk_line": [], "_mk_error": [], "_mk_payload": []}
        for file, line, values, error, payload in self.checked(batch):
            for j, (n, _t) in enumerate(out_fields):
                cols[n].append(None if values is None else values[j])
            meta["_mk_file"].append(file)
            meta["_mk_line"].append(line)
            meta["_mk_error"].append(error)
            meta["_mk_payload"].append(payload)
        return pa.RecordBatch.from_pydict({**cols, **meta}, schema=schema)

    def checked(self, batch) -> list[tuple]:
        """(file, line, storage values or None, error or None, payload or None) per non-empty
        row of the batch, in order."""
        files = batch.column("_mk_file").to_pylist()
        lines = batch.column("_mk_line").to_pylist()
        if self.csv_opts and self.csv_opts["lines"]:
            lines = [map_line(self.csv_opts["lines"], n) for n in lines]
        return self.checked_rows(files, lines, batch.drop_columns(["_mk_file", "_mk_line"]).to_pylist())

    def checked_rows(self, files: list, lines: list[int], rows: list[dict]) -> list[tuple]:
        """``checked`` of rows given as Python lists (a JSONL chunk's refused lines: no Arrow
        batch is built for them, so this process need not import pandas, which pyarrow loads
        on its first conversion of Python values)."""
        from pydantic import ValidationError

        encode, adapter, _out_fields, _schema = self.tools()
        results: list = [None] * len(rows)  # (values | None, error | None, payload)
        pending: list[tuple[int, dict, object]] = []
        for i, row in enumerate(rows):
            raw = row.get("_mk_text")
            try:
                data, payload = self.parse(row)
            except ValueError as exc:
                results[i] = (None, str(exc), _payload(raw))
                continue
            if data is None:
                continue  # an empty line
            pending.append((i, data, payload))
        while pending:
            try:
                models = adapter.validate_python([d for _, d, _ in pending])
            except ValidationError as exc:
                failing: dict[int, list] = {}
                for err in exc.errors():
                    failing.setdefault(err["loc"][0], []).append(err)
                for k, errs in failing.items():
                    i, _d, payload = pending[k]
                    reason = "invalid row: " + "; ".join(
                        f"{'.'.join(map(str, e['loc'][1:])) or 'row'}: {e['msg']}" for e in errs)
                    results[i] = (None, reason, _payload(payload))
                pending = [p for k, p in enumerate(pending) if k not in failing]
                continue
            for (i, _d, payload), m in zip(pending, models):
                try:
                    values = encode(m)
                    self.layout.check_int_range(values)  # SQLite stores 64 bits: a bad row, not a crash
                    results[i] = (values, None, None)
                except Exception as exc:  # InvalidRecordError: NaN, int beyond 64 bits
                    results[i] = (None, dumpfiles.invalid_row_reason(exc), _payload(payload))
            pending = []
        return [(files[i], lines[i], *res) for i, res in enumerate(results) if res is not None]


def _payload(raw) -> str:
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        raw = json.dumps(raw, default=str, ensure_ascii=False)
    return raw[:10000]


def _arrow_schema(out_fields):
    fields = [pa.field(n, arrow_type(t)) for n, t in out_fields]
    fields += [pa.field("_mk_file", pa.string()), pa.field("_mk_line", pa.int64()),
               pa.field("_mk_error", pa.string()), pa.field("_mk_payload", pa.string())]
    return pa.schema(fields)

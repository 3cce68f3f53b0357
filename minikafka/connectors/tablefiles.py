"""The rows of a CSV or Parquet file as ``ingest_file`` validates them: origin, payload, data or problem.

CSV (plain or gzip, by content): the header row names the fields; each value is text, typed
later by the model (pydantic's lax rules), except that an empty field is None where the model
allows None and a nested field (list, dict, set, tuple, model) is parsed as JSON text. A row
with another number of fields than the header is a problem row. Parquet (pyarrow, no JVM): each
row as a dict of Python values, read in batches so memory stays bounded.
"""

from __future__ import annotations

import csv
import io
import json
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputFileError
from ..util.dumpfiles import open_binary

PARQUET_BATCH = 10_000


@dataclass(frozen=True)
class FileRecord:
    """One row of a file: ``data`` to validate, or ``problem`` (both None: a blank line)."""

    origin: str
    payload: str
    data: dict[str, Any] | None
    problem: str | None = None


def _unwrapped(annotation) -> tuple[Any, bool]:
    """(the annotation without Optional, whether it accepts None)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrapped(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        rest = [a for a in args if a is not type(None)]
        inner = rest[0] if len(rest) == 1 else annotation
        return inner, len(rest) < len(args)
    return annotation, annotation is None or annotation is type(None) or annotation is Any


def _nested(annotation) -> bool:
    from pydantic import BaseModel

    if typing.get_origin(annotation) in (list, dict, set, tuple, frozenset):
        return True
    return isinstance(annotation, type) and issubclass(annotation, (BaseModel, list, dict, set, tuple))


def csv_records(path: Path, model, *, delimiter: str | None = None) -> Iterator[FileRecord]:
    """The rows of the CSV file ``path`` (``.tsv``: tab-separated) for ``model``'s fields.

    Raises:
        InputFileError: the file cannot be read, is not UTF-8, or has no header row.
    """
    fields = getattr(model, "model_fields", {})
    nullable, nested = set(), set()
    for name, info in fields.items():
        inner, accepts_none = _unwrapped(info.annotation)
        if accepts_none:
            nullable.add(name)
        if _nested(inner):
            nested.add(name)
    sep = delimiter or ("\t" if ".tsv" in [s.lower() for s in path.suffixes] else ",")
    try:
        with open_binary(path) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as text:
            reader = csv.reader(text, delimiter=sep)
            header = next(reader, None)
            if not header:
                raise InputFileError(f"{path}: no header row (the first line names the fields)")
            header = [h.strip() for h in header]
            start = reader.line_num
            for values in reader:
                origin = f"{path.name}:{start + 1}"
                start = reader.line_num
                if not values or all(not v.strip() for v in values) and len(values) <= 1:
                    yield FileRecord(origin, "", None)
                    continue
                payload = sep.join(values)
                if len(values) != len(header):
                    yield FileRecord(origin, payload, None,
                                     f"{len(values)} field(s), the header names {len(header)}")
                    continue
                yield FileRecord(origin, payload, {k: _cell(k, v, nullable, nested) for k, v in zip(header, values)})
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except csv.Error as exc:
        raise InputFileError(f"{path}: unreadable CSV ({exc})") from exc
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def _cell(name: str, value: str, nullable: set[str], nested: set[str]):
    if value == "" and name in nullable:
        return None
    if name in nested and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value  # the model says why
    return value


def parquet_records(path: Path) -> Iterator[FileRecord]:
    """The rows of the Parquet file ``path``, ``file:row N`` as their origin.

    Raises:
        InputFileError: the file cannot be read as Parquet.
    """
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is a core dependency
        raise InputFileError(f"{path}: reading Parquet needs pyarrow") from exc
    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=PARQUET_BATCH)
        number = 0
        for batch in batches:
            for row in batch.to_pylist():
                number += 1
                yield FileRecord(f"{path.name}:row {number}", json.dumps(row, default=str, ensure_ascii=False), row)
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read as Parquet ({exc})") from exc
    except Exception as exc:  # noqa: BLE001 - pyarrow's own errors (ArrowInvalid) name the problem
        if type(exc).__module__.startswith("pyarrow"):
            raise InputFileError(f"{path}: cannot read as Parquet ({exc})") from exc
        raise

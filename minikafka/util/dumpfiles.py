"""Reading line files (JSONL, CSV; plain or gzip) the same way for ``ingest`` and ``backfill``.

Gzip is recognised by its magic bytes, never by the name: a ``.gz`` file holding plain
text is read as plain text, and a gzip file without ``.gz`` is decompressed. A corrupt
or truncated gzip file is an :class:`~minikafka.errors.InputFileError` naming the file
("corrupt" for a bad header or bad compressed data, "truncated" only for a stream that
ends early);
a line that is not UTF-8 (or not a JSON object) is a problem of that line only, told
with its ``file:line`` origin, so the caller can quarantine it and go on.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import InputFileError

GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class DumpFormat:
    """A format backfill reads dumps in: the one table that detection, Spark's read, the row
    checks and the CLI's choices all use (a new format is a row here, then its reader)."""

    name: str
    suffixes: tuple[str, ...]  # the file names that tell it (before an optional .gz)
    reader: str  # how Spark reads a file: "chunks" (line-aligned chunks the driver cuts), "csv", "parquet"
    rows: str  # what a row is at the checks: "json" (a line's JSON object), "csv" (text fields), "values"


DUMP_FORMATS: dict[str, DumpFormat] = {f.name: f for f in (
    DumpFormat("jsonl", (".jsonl", ".ndjson", ".json"), "chunks", "json"),
    DumpFormat("csv", (".csv", ".tsv"), "csv", "csv"),
    DumpFormat("parquet", (".parquet",), "parquet", "values"),
)}


def dump_format(name: str) -> DumpFormat:
    """The format called ``name``.

    Raises:
        ValueError: no such format (names it and the known ones).
    """
    try:
        return DUMP_FORMATS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown dump format {name!r}: one of {', '.join(DUMP_FORMATS)}") from None


def detect_dump_format(path: str | os.PathLike) -> str | None:
    """The format ``path``'s name tells (``x.jsonl``, ``x.csv.gz``, ...), or None."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    return next((f.name for f in DUMP_FORMATS.values() if last in f.suffixes), None)


def _open(path: str | os.PathLike) -> IO[bytes]:
    """The file opened for binary reading (buffered, so its head can be peeked at).

    Raises:
        InputFileError: the file cannot be read.
    """
    try:
        return open(path, "rb")  # noqa: SIM115 (returned to the caller)
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _head(fh: IO[bytes], path: str | os.PathLike) -> bytes:
    """The first bytes of an open file (at most 10, a gzip header's size), without consuming them."""
    try:
        return fh.peek(10)[:10]
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def is_gzip(path: str | os.PathLike) -> bool:
    """True when the file starts with the gzip magic bytes (whatever its name says).

    Raises:
        InputFileError: the file cannot be read.
    """
    with _open(path) as fh:
        return _head(fh, path)[:2] == GZIP_MAGIC


def named_gzip(path: str | os.PathLike) -> bool:
    """True when the name ends in ``.gz`` (what Spark and Hadoop go by)."""
    return Path(path).suffix.lower() == ".gz"


def gzip_header_problem(head: bytes) -> str | None:
    """Why the first bytes of a gzip file (magic included) cannot start a gzip stream, or None.

    Only what the header itself shows is told here (a compression method other than
    deflate, reserved flag bits set); a header that merely stops short is for the reader
    to call truncated.
    """
    if len(head) > 2 and head[2] != 8:
        return f"unknown compression method {head[2]} in the gzip header"
    if len(head) > 3 and head[3] & 0xE0:
        return "reserved flag bits set in the gzip header"
    return None


def _sniff_gzip(fh: IO[bytes], path: str | os.PathLike) -> bool:
    """Whether the open file is gzip (by its magic bytes); nothing is consumed.

    Raises:
        InputFileError: "corrupt gzip file" when the gzip header is bad (a header cut
            short is left to the reader to call truncated), naming the file.
    """
    head = _head(fh, path)
    if head[:2] != GZIP_MAGIC:
        return False
    problem = gzip_header_problem(head)
    if problem:
        raise InputFileError(f"{path}: corrupt gzip file ({problem})")
    return True


def open_binary(path: str | os.PathLike) -> IO[bytes]:
    """The file's content as a binary stream: decompressed when it is gzip (by content).

    Raises:
        InputFileError: the file cannot be read, or its gzip header is corrupt.
    """
    raw = _open(path)
    try:
        gz = _sniff_gzip(raw, path)
    except BaseException:
        raw.close()
        raise
    return gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw


def decode_line(raw: bytes) -> tuple[str | None, str | None]:
    """(text, None) for a UTF-8 line, or (None, reason) for one that is not."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"line holds bytes that are not UTF-8 ({exc.reason} at byte {exc.start})"


def parse_json_object(text: str) -> tuple[Any, str | None]:
    """(dict, None) for a line holding one JSON object, or (None, reason)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"malformed JSON: {exc}"
    if not isinstance(data, dict):
        return None, f"expected a JSON object, got {type(data).__name__}"
    return data, None


FAST_JSON = True  # False: every line takes the exact path (tests compare the two)


def fast_json_allowed(model: Any) -> bool:
    """Whether a JSON line may be validated by pydantic-core's JSON validator
    (``model.model_validate_json``) before the exact path (``parse_json_object``, then
    ``model_validate``): only the lines that validator accepts are taken from it, and on
    those the two agree (tested line by line, ``tests/spark/loading/test_fast_json.py``).
    Not where the two would differ:
    - any part of the model validates strictly: the JSON validator accepts strings (an
      ISO date for a datetime) that the exact path refuses;
    - a ``Decimal`` anywhere: the JSON validator reads ``1.0`` as ``Decimal('1')``, the
      exact path as ``Decimal('1.0')``, and the stored text (a dedup key) would differ;
    - a model with its own ``model_validate``: the exact path runs it, the validator not.
    (A validator reading ``info.mode`` sees ``'json'`` on the fast path.)"""
    from pydantic import BaseModel

    if not FAST_JSON or getattr(model.model_validate, "__func__", None) is not BaseModel.model_validate.__func__:
        return False
    schema = repr(model.__pydantic_core_schema__)
    return "'strict': True" not in schema and "'type': 'decimal'" not in schema


def json_validator(model: Any) -> Callable[[bytes], Any]:
    """``model.model_validate_json`` as one call into pydantic-core: its validator's own
    ``validate_json``, which that method calls with the same (default) arguments. The
    method's Python frame cost about 1 µs a line, most of it on the lines it refuses.
    A model that overrides the method keeps its own."""
    from pydantic import BaseModel

    if getattr(model.model_validate_json, "__func__", None) is BaseModel.model_validate_json.__func__:
        return model.__pydantic_validator__.validate_json
    return model.model_validate_json


def invalid_row_reason(exc: Exception, *, skip_loc: int = 0) -> str:
    """The quarantine reason for a row the model or the ledger refuses (ingest and backfill alike).

    A pydantic ``ValidationError`` reads ``invalid row: field: message; ...``; anything else
    (``InvalidRecordError`` for a NaN, an int beyond 64 bits...) ``invalid row: message``.

    Args:
        exc: the error.
        skip_loc: leading parts of each error location to drop (1 for a list validated at once).
    """
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return "invalid row: " + "; ".join(
                f"{'.'.join(map(str, e['loc'][skip_loc:])) or 'row'}: {e['msg']}" for e in errors())
        except Exception:  # noqa: BLE001 - not pydantic's errors(): fall back to the message
            pass
    return f"invalid row: {exc}"


@dataclass(slots=True)
class Line:
    """One line of an input file, without its line break (one is made per line: slots, and
    the origin is built only for a line that needs it).

    Attributes:
        number: 1-based line number.
        name: the file's name in origins.
        raw: the line's bytes.
        text: the decoded line, or None when it is not UTF-8.
        problem: why the line cannot be read as text (None when it can).
    """

    number: int
    name: str
    raw: bytes
    text: str | None
    problem: str | None

    @property
    def origin(self) -> str:
        """``name:number``, as the quarantine stores it."""
        return f"{self.name}:{self.number}"

    @property
    def blank(self) -> bool:
        return not self.raw.strip()

    @property
    def payload(self) -> str:
        """The line as text for the quarantine (undecodable bytes replaced)."""
        return self.text if self.text is not None else self.raw.decode("utf-8", errors="replace")


def read_lines(path: str | os.PathLike, *, name: str | None = None) -> Iterator[Line]:
    """Every line of ``path`` (gzip decompressed, by content), numbered from 1.

    Args:
        path: the file.
        name: the file's name in origins (default: the file name).

    Raises:
        InputFileError: the file cannot be read, or is a corrupt or truncated gzip file
            (raised when the reader reaches the damage: lines before it were yielded).
    """
    name = name or Path(path).name
    number = 0
    with open_binary(path) as fh:
        try:
            for raw in fh:
                number += 1
                raw = raw.rstrip(b"\r\n") if raw.endswith(b"\n") else raw
                text, problem = decode_line(raw)
                yield Line(number, name, raw, text, problem)
        except EOFError as exc:
            raise InputFileError(f"{path}: truncated gzip file (it ends before the gzip stream does"
                                 f"{_after(number)})") from exc
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise InputFileError(f"{path}: corrupt gzip file ({exc}{_after(number)})") from exc
        except OSError as exc:
            raise InputFileError(f"{path}: cannot read ({exc.strerror or exc}{_after(number)})") from exc


def _after(number: int) -> str:
    return f", after line {number}" if number else ""


@dataclass
class Scanned:
    """What :func:`scan` learnt of a file.

    Attributes:
        gzip: the content is gzip (by its magic bytes).
        sha256: hash of the (decompressed) content.
        raw_sha256: hash of the file's bytes when it is gzip, else None.
        has_data: the content holds anything but whitespace.
    """

    gzip: bool
    sha256: str
    raw_sha256: str | None
    has_data: bool


def raw_digest(path: str | os.PathLike) -> str:
    """sha256 of the file's bytes.

    Raises:
        InputFileError: the file cannot be read.
    """
    with _open(path) as fh:
        try:
            return hashlib.file_digest(fh, "sha256").hexdigest()
        except OSError as exc:
            raise InputFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc


@functools.cache
def _gzip_zlib():
    """The zlib-compatible module that decompresses gzip: ISA-L's (the ``isal`` package, in
    the ``spark`` extra) when installed, else zlib. The same bytes either way; measured on a
    972 MiB dump (2M lines, level 1): 0.84 s against 3.4 s, on the driver's one core while a
    backfill cuts the dump."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib
    return isal_zlib


def scan(path: str | os.PathLike, *, raw_sha256: str | None = None,
         sink: Callable[[bytes], None] | None = None) -> Scanned:
    """Hash the whole content and check that a gzip file is complete (multi-member gzip allowed).

    ``raw_sha256``: the file's byte hash when the caller has it already (gzip files).
    ``sink``: called with each block of the (decompressed) content, in order, as it is read.

    Raises:
        InputFileError: unreadable, or a corrupt or truncated gzip file (names the file).
    """
    digest = hashlib.sha256()
    has_data = False
    gzip_zlib = _gzip_zlib()
    with _open(path) as raw:
        gz = _sniff_gzip(raw, path)
        try:
            if gz:
                decomp = gzip_zlib.decompressobj(wbits=31)
                while chunk := raw.read(1 << 20):
                    while chunk:
                        data = decomp.decompress(chunk)
                        digest.update(data)
                        has_data = has_data or bool(data.strip())
                        if sink is not None and data:
                            sink(data)
                        chunk = decomp.unused_data if decomp.eof else b""
                        if decomp.eof and chunk:  # a multi-member gzip file: next member
                            decomp = gzip_zlib.decompressobj(wbits=31)
                if not decomp.eof:
                    raise InputFileError(f"{path}: truncated gzip file (it ends before the gzip stream does)")
            else:
                while chunk := raw.read(1 << 20):
                    digest.update(chunk)
                    has_data = has_data or bool(chunk.strip())
                    if sink is not None:
                        sink(chunk)
        except (zlib.error, gzip_zlib.error) as exc:
            raise InputFileError(f"{path}: corrupt gzip file: {exc}") from exc
        except OSError as exc:
            raise InputFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return Scanned(gz, digest.hexdigest(), (raw_sha256 or raw_digest(path)) if gz else None, has_data)

"""Append a JSONL file (or a CSV or Parquet one: ``ingest_file``) to a topic from plain Python (no Spark).

Every line is validated on its own, first by pydantic-core's JSON validator (one call in
Rust); a line it refuses takes the exact path (``json.loads``, then the model), which
gives the verdict and the reason, so the fast validator only ever saves time (the two
agree on every line both accept: ``tests/spark/loading/test_fast_json.py``). Lines that
are not UTF-8, malformed JSON and rows the model rejects go to the quarantine with their
``file:line`` origin and reason; the valid
rows are appended in one transaction, duplicates of the dedup key skipped. The file is
streamed: rows are inserted into that open transaction in batches as they are read, so
memory does not grow with the file. Gzip is
recognised by content, not by name (``minikafka.util.dumpfiles``, the reader ``backfill``
uses too). A corrupt or truncated gzip file raises ``InputFileError`` before anything is
written.

Re-ingesting a file accounts for every line: an invalid line whose origin *and* content
are already in the quarantine is counted as ``already_quarantined`` (storing it again
would add nothing); an invalid line at a known origin with different content (a file
rewritten every night) is quarantined again. So ``lines == appended + duplicates +
quarantined + already_quarantined + blank`` always holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..api.core import unknown
from ..api.core.rows import TopicRows, rows_of
from ..api.topic import Topic
from ..errors import InvalidRecordError, InvalidSettingError
from ..ledger.consuming import Quarantined
from ..ledger.consuming import quarantine as store
from ..util.clock import utc_now
from ..util.dumpfiles import fast_json_allowed, invalid_row_reason, json_validator, parse_json_object, read_lines
from ..util.results import Result

PAYLOAD_CHARS = 10_000  # the quarantine keeps this much of a line
BATCH_ROWS = 5_000  # valid rows held in memory before they are inserted into the open transaction


@dataclass
class IngestResult(Result):
    """Counts of one ingest; every line read is in exactly one of the last five.

    Attributes:
        lines: lines read (blank ones included).
        appended: valid rows appended.
        duplicates: valid rows skipped as duplicates of the dedup key.
        quarantined: invalid lines stored in the quarantine by this call.
        already_quarantined: invalid lines whose origin and content the quarantine held already.
        blank: empty or whitespace-only lines, skipped.
    """

    lines: int = 0
    appended: int = 0
    duplicates: int = 0
    quarantined: int = 0
    already_quarantined: int = 0
    blank: int = 0
    unknown_dropped: dict = field(default_factory=dict)  # {field the model lacks: rows stored without it}

    @property
    def accounted(self) -> int:
        return self.appended + self.duplicates + self.quarantined + self.already_quarantined + self.blank

    @property
    def rows(self) -> int:
        """Non-blank lines."""
        return self.lines - self.blank

    def summary(self, name: str | None = None) -> str:
        """One line of counts, after ``name`` (the file) when given."""
        dropped = "".join(f", unknown field {n!r} dropped from {c} row(s)" for n, c in sorted(self.unknown_dropped.items()))
        return ((f"{name}: " if name else "") + f"{self.lines} lines, {self.appended} appended, {self.duplicates} duplicates, "
                f"{self.quarantined} quarantined, {self.already_quarantined} already quarantined, "
                f"{self.blank} blank" + dropped)


class _Load:
    """One file's transaction: quarantine what is invalid, insert what is valid in batches, and
    apply the topic's policy for a field the model lacks (``unknown_fields``)."""

    def __init__(self, topic, rows, conn, path: Path, batch_rows: int, result: IngestResult,
                 unknown_fields: str | None):
        self.rows, self.conn, self.batch_rows, self.result = rows, conn, batch_rows, result
        self.now = utc_now()
        self.known = store.known_origins(conn, rows.name, f"{path.name}:")
        self.ignore_duplicates = bool(rows.dedup)
        self.valid: list = []  # at most batch_rows validated models, waiting for the next insert
        self.encoded: list[tuple] = []  # their storage values (encoding is the check of what the ledger can hold)
        self.seen_valid = 0
        plain = type(rows).validate is TopicRows.validate
        if unknown_fields is None:
            unknown_fields = topic.unknown_fields if isinstance(topic, Topic) else "drop"
        unknown.check_policy(rows.name, unknown_fields, rows.model)
        self.unknown_fields = unknown_fields
        # a field the model lacks: the fast validator (forbidding extra fields) refuses the line,
        # the exact path (``take``) applies the policy
        self.watch = plain and unknown.watched(rows.model) and unknown_fields != "evolve"
        self.keeps = plain and unknown_fields == "evolve"  # a new extra field gets a column (unknown.keep_fields)
        self.encode = rows.encode
        self.layout_names = set(rows.layout.field_names)

    def quarantine(self, origin: str, text: str, reason: str) -> None:
        payload = text.strip()[:PAYLOAD_CHARS]
        if (origin, payload) in self.known:
            self.result.already_quarantined += 1
            return
        store.quarantine_in_current_transaction(self.conn, [Quarantined(self.rows.name, payload, reason, origin,
                                                                        self.now)])
        self.result.quarantined += 1

    def flush(self) -> None:
        if self.valid:
            self.result.appended += self.rows.insert_encoded_in_current_transaction(
                self.valid, self.encoded, ignore_duplicates=self.ignore_duplicates, now=self.now)
            self.valid.clear()
            self.encoded.clear()

    def kept(self, model) -> None:
        """Columns for the extra fields ``model`` kept that the topic lacks (evolve)."""
        extra = model.__pydantic_extra__
        if extra and any(name not in self.layout_names for name in extra):
            self.flush()  # the rows waiting were encoded for the columns before
            if unknown.keep_fields(self.rows, self.conn, (model,)):
                self.encode = self.rows.encode
                self.layout_names.update(self.rows.layout.field_names)

    def accept(self, model, values: tuple) -> None:
        self.valid.append(model)
        self.encoded.append(values)
        self.seen_valid += 1
        if len(self.valid) >= self.batch_rows:
            self.flush()

    def take(self, origin: str, payload: str, data) -> None:
        """Validate ``data`` (a dict) against the model: appended, or quarantined with the reason."""
        rows = self.rows
        extra = unknown.unknown_of(rows.model, data) if self.watch and isinstance(data, dict) else None
        if extra:
            if self.unknown_fields == "quarantine":
                self.quarantine(origin, payload, unknown.refusal(rows.name, extra))
                return
            for name in extra:
                self.result.unknown_dropped[name] = self.result.unknown_dropped.get(name, 0) + 1
        try:
            model = rows.validate(data)
            if self.keeps:
                self.kept(model)
            values = rows.encode(model)  # refuses what the ledger cannot store (NaN inside JSON, ...)
            rows.layout.check_int_range(values)  # SQLite stores 64 bits: a larger int is a bad row
        except (ValidationError, InvalidRecordError, TypeError, ValueError) as exc:
            self.quarantine(origin, payload, invalid_row_reason(exc))
            return
        self.accept(model, values)

    def close(self) -> None:
        self.flush()
        self.result.duplicates = self.seen_valid - self.result.appended
        if self.result.unknown_dropped:
            unknown.log.warning(unknown.warning(self.rows.name, self.result.unknown_dropped))


def _check_batch_rows(batch_rows) -> None:
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InvalidSettingError(f"batch_rows must be a positive integer, got {batch_rows!r}")


def ingest_jsonl(topic: Topic | TopicRows, path: str | Path, *, batch_rows: int = BATCH_ROWS,
                 unknown_fields: str | None = None,
                 record: Callable[[Any, IngestResult], None] | None = None) -> IngestResult:
    """Validate and append every line of ``path`` (plain or gzip, by content) to ``topic``.

    One transaction covers the whole file (all or nothing), and memory stays bounded:
    valid rows are inserted into the open transaction every ``batch_rows`` rows as the
    file is read, invalid lines go to the quarantine as they are met. The ledger's write
    lock is held from the first line to the commit. ``record(conn, result)``: called in that
    transaction once the file is read (what ``nightly`` notes of the file commits with its rows).

    A field the model lacks follows ``unknown_fields`` (default: the Topic's own, else
    "drop"; ``api/core/unknown.py``): "drop" stores the row without it and logs one warning
    naming each field and how many rows carried it (also in ``unknown_dropped`` and the
    summary), "quarantine" sends the row to the quarantine with a reason naming the field.

    Returns:
        IngestResult: the counts (see its identity in the module docstring).

    Raises:
        InputFileError: the file cannot be read, or is a corrupt or truncated gzip file;
            nothing was written (the transaction is rolled back).
    """
    _check_batch_rows(batch_rows)
    path = Path(path)
    rows = rows_of(topic)
    result = IngestResult()
    # pydantic-core's JSON validator first (one call in Rust per line); a line it refuses, or
    # whose values the ledger refuses, takes the exact path, which gives the verdict and the reason
    # (not for a stream: its rows wrap the whole line, which TopicRows' validate does not)
    plain = type(rows).validate is TopicRows.validate
    layout = rows.layout
    with rows.ledger.atomic() as conn:
        load = _Load(topic, rows, conn, path, batch_rows, result, unknown_fields)
        fast_model = unknown.forbidding(rows.model) if load.watch else rows.model
        validate_json = json_validator(fast_model) if plain and fast_json_allowed(rows.model) else None
        for line in read_lines(path):
            result.lines += 1
            if line.blank:
                result.blank += 1
                continue
            if line.problem:
                load.quarantine(line.origin, line.payload, line.problem)
                continue
            if validate_json is not None:
                try:
                    model = validate_json(line.raw)
                    if load.keeps:
                        load.kept(model)
                    values = load.encode(model)
                    layout.check_int_range(values)
                except Exception:  # noqa: BLE001 - the exact path below decides
                    pass
                else:
                    load.accept(model, values)
                    continue
            data, problem = parse_json_object(line.text)
            if problem:
                load.quarantine(line.origin, line.payload, problem)
                continue
            load.take(line.origin, line.payload, data)
        load.close()
        if record is not None:
            record(conn, result)
    return result


def ingest_file(topic: Topic | TopicRows, path: str | Path, *, fmt: str | None = None, batch_rows: int = BATCH_ROWS,
                unknown_fields: str | None = None,
                record: Callable[[Any, IngestResult], None] | None = None) -> IngestResult:
    """Append a JSONL, CSV or Parquet file (``fmt``, else told by its name; JSONL when the name tells
    none) to ``topic``, as ``ingest_jsonl`` does: every row validated against the model, invalid
    rows to the quarantine with ``file:line`` (CSV: the line of the row, the header being line 1;
    Parquet: ``file:row N``), a field the model lacks as ``unknown_fields`` says, one
    transaction, no JVM.

    CSV: a header row names the fields; values are text, typed by the model (pydantic's lax
    rules: ``"3"`` for an int, ISO text for a datetime); an empty field is None where the model
    allows None; a nested field (list, dict, model) is read as JSON text. ``.tsv``: tab-separated.
    Parquet: the file's column types, then the model's checks. A row counts as a line.

    Raises:
        InputFileError: the file cannot be read (or is no Parquet file); nothing was written.
    """
    from ..util.dumpfiles import detect_dump_format
    from .tablefiles import csv_records, parquet_records

    fmt = fmt or detect_dump_format(path) or "jsonl"
    if fmt == "jsonl":
        return ingest_jsonl(topic, path, batch_rows=batch_rows, unknown_fields=unknown_fields, record=record)
    _check_batch_rows(batch_rows)
    path = Path(path)
    rows = rows_of(topic)
    result = IngestResult()
    records = csv_records(path, rows.model) if fmt == "csv" else parquet_records(path)
    with rows.ledger.atomic() as conn:
        load = _Load(topic, rows, conn, path, batch_rows, result, unknown_fields)
        for rec in records:
            result.lines += 1
            if rec.data is None and rec.problem is None:
                result.blank += 1
            elif rec.problem is not None:
                load.quarantine(rec.origin, rec.payload, rec.problem)
            else:
                load.take(rec.origin, rec.payload, rec.data)
        load.close()
        if record is not None:
            record(conn, result)
    return result

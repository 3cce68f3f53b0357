"""A safe row filter for tools: ``FIELD OP VALUE`` parsed, checked against a topic's columns.

The field must be one of the topic's columns (or a metadata column), the operator one
of a fixed list, and the value is converted to the column's type and always passed as
a parameter: no text from the user ever becomes SQL.

Operators: ``=`` ``!=`` ``<`` ``<=`` ``>`` ``>=`` ``~`` (contains, text), and
``= null`` / ``!= null`` for missing values.

Values are converted to the form the ledger stores, so SQLite's comparison is right:

- datetime (and ``_created_at``, ``_handled_at``): any ISO 8601 form (``2025-01-01``,
  ``2025-01-01T00:03:00Z``, ``2025-01-01 01:03:00+01:00``; no offset means UTC) becomes the
  stored fixed-width UTC text ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, which sorts as time does.
- date: ``YYYY-MM-DD``; time: pydantic's ``HH:MM:SS[.ffffff]``; UUID: its lowercase form.
- int (64-bit), float (not NaN), ``true``/``false``, an enum's values, a Decimal (``=``/``!=``
  only, compared by value: ``1.5`` matches a stored ``1.50``).
- ``_status``: ``new`` or ``handled`` (``=``/``!=``), as ``show`` prints it; ``_status`` and
  ``_handled_at`` are computed from positions and acks (ledger/topics/status.py), as every reader does.
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from ...errors import InvalidFilterError
from ...util.clock import format_timestamp
from .columns import INT64_MAX, INT64_MIN
from .identifiers import quote_identifier
from .layout import TopicLayout

OPERATORS = ("!=", "<=", ">=", "=", "<", ">", "~")
_SQL_OP = {"=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(!=|<=|>=|==|=|<|>|~)\s*(.*?)\s*$", re.S)
META_KINDS = {"_id": "int", "_created_at": "datetime", "_status": "status", "_handled_at": "datetime",
              "_parent_id": "int", "_parent_topic": "str", "_run_id": "str"}
STATUSES = ("new", "handled")
# decimals are text of varying scale, bools and statuses have no order: = and != only
_ORDERED_KINDS = {"int", "float", "str", "datetime", "date", "time", "text", "enum"}
_ACCEPTS = {
    "int": "a whole number in the 64-bit range, e.g. 42",
    "float": "a number, e.g. 0.5, 1e-3 or inf (not NaN)",
    "bool": "true or false (also 1/0, yes/no)",
    "datetime": "an ISO 8601 date-time, e.g. 2025-01-01T00:03:00Z, 2025-01-01 01:03:00+01:00 or 2025-01-01 "
                "(no offset: UTC)",
    "date": "an ISO 8601 date, e.g. 2025-01-31",
    "time": "an ISO 8601 time, e.g. 00:03:00 or 00:03:00.5",
    "uuid": "a UUID, e.g. 12345678-1234-5678-1234-567812345678",
    "decimal": "a decimal number, e.g. 12.50",
    "status": "new or handled",
}


@dataclass(frozen=True)
class Condition:
    """One parsed filter. ``value`` is what the ledger stores (None: ``= null``).

    ``kind`` picks the SQL: ``decimal`` compares by value, ``status`` reads the status
    as ``show`` prints it (``topic``: whose positions and acks count).
    """

    field: str
    op: str
    value: Any
    kind: str = ""
    topic: str = ""

    def sql(self) -> tuple[str, tuple]:
        col = quote_identifier(self.field)
        if self.field == "_handled_at":  # no column: computed from positions and acks
            from . import status

            col = f"({status.render(status.HANDLED_AT, self.topic)})"
        if self.value is None:
            return (f"{col} IS NULL" if self.op == "=" else f"{col} IS NOT NULL"), ()
        if self.op == "~":
            return f"instr({col}, ?) > 0", (self.value,)
        if self.kind == "status":
            return self._status_sql()
        if self.kind == "decimal":
            # stored text keeps the scale it was given ("1.50"): compare without trailing zeros
            trimmed = f"CASE WHEN instr({col}, '.') > 0 THEN rtrim(rtrim({col}, '0'), '.') ELSE {col} END"
            values = ("0", "-0") if self.value == "0" else (self.value,)
            marks = ", ".join("?" for _ in values)
            neg = "NOT " if self.op == "!=" else ""
            return f"{col} IS NOT NULL AND {trimmed} {neg}IN ({marks})", values
        return f"{col} {_SQL_OP[self.op]} ?", (self.value,)

    def _status_sql(self) -> tuple[str, tuple]:
        from . import acks

        want_handled = (self.value == "handled") == (self.op == "=")
        if want_handled:
            return acks.done_filter(None, self.topic or None)
        return acks.pending_filter(None, self.topic or None)


def parse_condition(layout: TopicLayout, text: str) -> Condition:
    """Parse ``FIELD OP VALUE`` against ``layout``.

    Raises:
        InvalidFilterError: the text does not parse, the field is not a column, the
            operator does not apply to the column, or the value is not of its type
            (the message names the value and what the column accepts).
    """
    m = _PATTERN.match(text or "")
    if not m:
        raise InvalidFilterError(
            f"cannot read filter {text!r}: write FIELD OP VALUE, e.g. 'score>=0.5', with OP one of "
            f"{' '.join(OPERATORS)}")
    name, op, raw = m.group(1), m.group(2), m.group(3)
    op = "=" if op == "==" else op
    kinds = {**META_KINDS, **{c.name: _kind(layout, c) for c in layout.columns}}
    if name not in kinds:
        raise InvalidFilterError(
            f"filter {text!r}: topic {layout.name!r} has no column {name!r} "
            f"(columns: {', '.join(layout.field_names)}; metadata: {', '.join(META_KINDS)})")
    kind = kinds[name]
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        raw, quoted = raw[1:-1], True
    else:
        quoted = False
    if not quoted and raw.lower() == "null":
        if op not in ("=", "!="):
            raise InvalidFilterError(f"filter {text!r}: only = and != compare with null")
        return Condition(name, op, None, topic=layout.name)
    if op == "~":
        if kind not in ("str", "text", "json", "datetime", "date", "time", "uuid", "enum", "decimal"):
            raise InvalidFilterError(f"filter {text!r}: ~ (contains) needs a text column; {name!r} is {kind}")
        return Condition(name, op, raw)
    if op not in ("=", "!=") and kind not in _ORDERED_KINDS:
        raise InvalidFilterError(f"filter {text!r}: {op} does not apply to {name!r} ({kind}); use = or !=")
    return Condition(name, op, _convert(text, name, kind, raw, layout), kind, layout.name)


def _kind(layout: TopicLayout, col) -> str:
    """The column's kind, with string-like ``text`` columns told apart by their JSON schema format."""
    if col.kind != "text":
        return col.kind
    prop = (layout.json_schema or {}).get("properties", {}).get(col.name, {})
    formats = {prop.get("format")} | {a.get("format") for a in prop.get("anyOf", []) if isinstance(a, dict)}
    if "time" in formats:
        return "time"
    if "uuid" in formats:
        return "uuid"
    return "text"


def _convert(text: str, name: str, kind: str, raw: str, layout: TopicLayout) -> Any:
    try:
        return _to_stored(kind, name, raw, layout)
    except (ValueError, ArithmeticError) as exc:
        accepts = _ACCEPTS.get(kind)
        why = f"expected {accepts}" if accepts else str(exc)
        raise InvalidFilterError(
            f"filter {text!r}: {raw!r} is not a valid {kind} for {name!r}: {why}") from None


def _to_stored(kind: str, name: str, raw: str, layout: TopicLayout) -> Any:
    """``raw`` as the ledger stores a value of ``kind`` (ValueError when it is not one)."""
    if kind == "int":
        value = int(raw)
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError("outside the 64-bit range")
        return value
    if kind == "float":
        value = float(raw)
        if math.isnan(value):
            raise ValueError("NaN")
        return value
    if kind == "bool":
        low = raw.lower()
        if low in ("true", "1", "yes"):
            return 1
        if low in ("false", "0", "no"):
            return 0
        raise ValueError("expected true or false")
    if kind == "datetime":
        return format_timestamp(datetime.fromisoformat(raw))
    if kind == "date":
        return date.fromisoformat(raw).isoformat()
    if kind == "time":
        from pydantic import TypeAdapter

        return TypeAdapter(time).dump_python(time.fromisoformat(raw), mode="json")
    if kind == "uuid":
        return str(uuid.UUID(raw))
    if kind == "decimal":
        value = Decimal(raw)
        if not value.is_finite():
            raise ValueError("not finite")
        out = format(value, "f")
        if "." in out:
            out = out.rstrip("0").rstrip(".")
        return "0" if out == "-0" else out
    if kind == "status":
        if raw not in STATUSES:
            raise ValueError("unknown status")
        return raw
    if kind == "enum":
        values = layout.column(name).enum_values or []
        for v in values:
            if str(v) == raw:
                return v
        raise ValueError(f"expected one of {', '.join(map(str, values))}")
    if kind == "bytes":
        raise ValueError("bytes columns cannot be filtered")
    return raw


def where_clause(layout: TopicLayout, filters: list[str] | tuple[str, ...]) -> tuple[str, tuple]:
    """All filters ANDed: an SQL condition (``1`` when there are none) and its parameters."""
    parts, params = [], []
    for text in filters:
        sql, p = parse_condition(layout, text).sql()
        parts.append(f"({sql})")
        params.extend(p)
    return (" AND ".join(parts) or "1"), tuple(params)

"""A safe row filter for tools: ``FIELD OP VALUE`` parsed, checked against a topic's columns.

The field must be one of the topic's columns (or a metadata column), the operator one
of a fixed list, and the value is converted to the column's type and always passed as
a parameter: no text from the user ever becomes SQL.

Operators: ``=`` ``!=`` ``<`` ``<=`` ``>`` ``>=`` ``~`` (contains, text), and
``= null`` / ``!= null`` for missing values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import MinikafkaError
from .identifiers import quote_identifier
from .layout import TopicLayout

OPERATORS = ("!=", "<=", ">=", "=", "<", ">", "~")
_SQL_OP = {"=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(!=|<=|>=|==|=|<|>|~)\s*(.*?)\s*$", re.S)
META_KINDS = {"_id": "int", "_created_at": "str", "_status": "str", "_handled_at": "str",
              "_parent_id": "int", "_parent_topic": "str", "_run_id": "str"}
_ORDERED_KINDS = {"int", "float", "str", "datetime", "date", "text", "enum"}  # decimals are text: = only


class InvalidFilterError(MinikafkaError, ValueError):
    """A --where filter that names no column, uses an unknown operator or a value of the wrong type."""


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: Any

    def sql(self) -> tuple[str, tuple]:
        col = quote_identifier(self.field)
        if self.value is None:
            return (f"{col} IS NULL" if self.op == "=" else f"{col} IS NOT NULL"), ()
        if self.op == "~":
            return f"instr({col}, ?) > 0", (self.value,)
        return f"{col} {_SQL_OP[self.op]} ?", (self.value,)


def parse_condition(layout: TopicLayout, text: str) -> Condition:
    """Parse ``FIELD OP VALUE`` against ``layout``.

    Raises:
        InvalidFilterError: the text does not parse, the field is not a column, the
            operator does not apply to the column, or the value is not of its type.
    """
    m = _PATTERN.match(text or "")
    if not m:
        raise InvalidFilterError(
            f"cannot read filter {text!r}: write FIELD OP VALUE, e.g. 'score>=0.5', with OP one of "
            f"{' '.join(OPERATORS)}")
    name, op, raw = m.group(1), m.group(2), m.group(3)
    op = "=" if op == "==" else op
    kinds = {**META_KINDS, **{c.name: c.kind for c in layout.columns}}
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
        return Condition(name, op, None)
    if op == "~":
        if kind not in ("str", "text", "json", "datetime", "date", "enum", "decimal"):
            raise InvalidFilterError(f"filter {text!r}: ~ (contains) needs a text column; {name!r} is {kind}")
        return Condition(name, op, raw)
    if op not in ("=", "!=") and kind not in _ORDERED_KINDS:
        raise InvalidFilterError(f"filter {text!r}: {op} does not apply to {name!r} ({kind}); use = or !=")
    return Condition(name, op, _convert(text, name, kind, raw, layout))


def _convert(text: str, name: str, kind: str, raw: str, layout: TopicLayout) -> Any:
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "bool":
            low = raw.lower()
            if low in ("true", "1", "yes"):
                return 1
            if low in ("false", "0", "no"):
                return 0
            raise ValueError("expected true or false")
        if kind == "enum":
            values = layout.column(name).enum_values or []
            for v in values:
                if str(v) == raw:
                    return v
            raise ValueError(f"expected one of {values!r}")
        if kind == "bytes":
            raise ValueError("bytes columns cannot be filtered")
    except ValueError as exc:
        raise InvalidFilterError(f"filter {text!r}: {raw!r} is not a valid {kind} for {name!r}: {exc}") from None
    return raw


def where_clause(layout: TopicLayout, filters: list[str] | tuple[str, ...]) -> tuple[str, tuple]:
    """All filters ANDed: an SQL condition (``1`` when there are none) and its parameters."""
    parts, params = [], []
    for text in filters:
        sql, p = parse_condition(layout, text).sql()
        parts.append(sql)
        params.extend(p)
    return (" AND ".join(parts) or "1"), tuple(params)

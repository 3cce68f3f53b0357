"""Check in the JVM what Spark can express of a pydantic model (backfill's fast path).

For each JSON line the JVM decides whether the row is *certainly* valid: the line is one
flat JSON object with nothing after it (see ``ONE_FLAT_OBJECT``), every field has
the JSON type pydantic accepts in strict form (a string for ``str``, an integer within
64 bits for ``int``, a finite number for ``float``, ``true``/``false`` for ``bool``, an
ISO-8601 string for ``datetime``/``date``, one of the values for an enum or Literal), is
present unless it may be missing, and meets the field's bounds, lengths and pattern. Such
rows get their storage values computed by Spark and never reach Python.

Every other row (malformed, wrong or lax types, constraint failures, anything the rules
here do not cover) goes to the pydantic validator on the executors, which gives the exact
verdict and reason. So the fast path only has to be sound, never complete: a row it
accepts is one pydantic accepts, stored with the same values.

A model with custom validators, ``extra='forbid'``, string-transforming config, or a
field type not listed above has no plan: all its rows go through pydantic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..ledger.layout import TopicLayout

ISO_DATETIME = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?$"
ISO_DATE = r"^\d{4}-\d{2}-\d{2}$"
# A line's shape once escapes (\x) become "e" and strings "s": one flat object and nothing
# after it. Spark's from_json reads the first object of '{...} junk' and ignores the rest,
# where json.loads (ingest, the pydantic path) refuses it ("Extra data"): only lines of
# this shape may take the fast path (objects nesting others go to pydantic).
ONE_FLAT_OBJECT = r"^[ \t\r\n]*\{[^{}\[\]\"\\]*\}[ \t\r\n]*$"
NON_STRING_TOKEN = r"^(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?|true|false|[{\[].*)$"
# a pattern whose meaning is the same in Java's and Rust's regex engines
SAFE_PATTERN = re.compile(r"^(?:[A-Za-z0-9 ^$.*+?()\[\]{}|,:/@_\-]|\\[dDwWsS./\-?*+()\[\]{}|^$])*$")
KINDS = ("str", "int", "float", "bool", "datetime", "date", "enum")
CONFIG_BLOCKERS = ("str_strip_whitespace", "str_to_lower", "str_to_upper", "str_min_length", "str_max_length",
                   "strict", "coerce_numbers_to_str", "allow_inf_nan", "validate_default")


@dataclass(frozen=True)
class FieldRule:
    name: str
    kind: str
    nullable: bool          # None is a valid value
    may_be_missing: bool    # absent key is valid (default None)
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    values: tuple | None = None


def _constraints(info) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for meta in info.metadata:
        found = False
        for key in ("ge", "gt", "le", "lt", "min_length", "max_length", "pattern"):
            value = getattr(meta, key, None)
            if value is not None:
                out[key] = value
                found = True
        if not found:
            return None  # an annotation we do not understand (a custom validator, strict, ...)
    return out


def plan(model: type[BaseModel], layout: TopicLayout) -> list[FieldRule] | None:
    """The JVM rules for ``model``, or None when its rows must all go through pydantic."""
    decorators = model.__pydantic_decorators__
    if (decorators.field_validators or decorators.model_validators or decorators.validators
            or decorators.root_validators or decorators.field_serializers or decorators.model_serializers):
        return None
    config = model.model_config
    if config.get("extra") == "forbid" or any(config.get(k) for k in CONFIG_BLOCKERS if k != "allow_inf_nan") \
            or config.get("allow_inf_nan") is False or type(model).__name__ != "ModelMetaclass":
        return None
    rules = []
    for name, info in model.model_fields.items():
        if info.alias and info.alias != name:
            return None
        col = layout.column(name)
        if col.kind not in KINDS:
            return None
        if col.kind == "enum" and not all(isinstance(v, str) for v in col.enum_values or []):
            return None
        limits = _constraints(info)
        if limits is None:
            return None
        pattern = limits.get("pattern")
        if pattern is not None and not SAFE_PATTERN.match(pattern):
            return None
        if not info.is_required() and info.default is not None:
            return None  # a missing key takes a default: left to pydantic
        if info.default_factory is not None:
            return None
        rules.append(FieldRule(name, col.kind, col.nullable, not info.is_required(),
                               limits.get("ge"), limits.get("gt"), limits.get("le"), limits.get("lt"),
                               limits.get("min_length"), limits.get("max_length"), pattern,
                               tuple(col.enum_values) if col.kind == "enum" else None))
    return rules


def parse_schema(rules: list[FieldRule]):
    """The from_json schema: each field in the Spark type its strict JSON form parses to."""
    from pyspark.sql import types as T

    spark_type = {"str": T.StringType(), "int": T.LongType(), "float": T.DoubleType(), "bool": T.BooleanType(),
                  "datetime": T.StringType(), "date": T.StringType(), "enum": T.StringType()}
    fields = [T.StructField(r.name, spark_type[r.kind], True) for r in rules]
    fields += [T.StructField("_mk_corrupt", T.StringType(), True)]
    return T.StructType(fields)


def checked_columns(rules: list[FieldRule], text):
    """(ok, [storage columns]) for a raw JSON line column ``text`` (string)."""
    from pyspark.sql import functions as F

    from .types import TIMESTAMP_WRITE

    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_mk_corrupt", "allowNonNumericNumbers": "false"}
    parsed = F.from_json(text, parse_schema(rules), opts)
    # any conversion failure fills _mk_corrupt, so a null below is a JSON null or a missing key
    shape = F.regexp_replace(F.regexp_replace(text, r"(?s)\\.", "e"), r'"[^"]*"', "s")
    ok = shape.rlike(ONE_FLAT_OBJECT) & parsed.isNotNull() & parsed.getField("_mk_corrupt").isNull()
    out = []
    for r in rules:
        v = parsed.getField(r.name)
        conds = []
        if r.kind in ("str", "datetime", "date", "enum"):
            # Spark hands a non-string JSON token to a string field as its JSON text; a value
            # that reads like one (a number, true/false, an object or array) goes to pydantic
            first = F.substring(v, 1, 1)
            suspicious = first.isin("-", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "t", "f", "{", "[")
            # CASE WHEN evaluates the regex only for the few values that start like a token
            conds.append(~F.when(suspicious, v.rlike(NON_STRING_TOKEN)).otherwise(F.lit(False)))
        if r.kind == "float":
            conds.append(~F.isnan(v) & (F.abs(v) != float("inf")))
        if r.kind in ("int", "float"):
            for op, bound in (("ge", r.ge), ("gt", r.gt), ("le", r.le), ("lt", r.lt)):
                if bound is not None:
                    conds.append({"ge": v >= bound, "gt": v > bound, "le": v <= bound, "lt": v < bound}[op])
        if r.kind == "str":
            if r.min_length is not None:
                conds.append(F.char_length(v) >= r.min_length)
            if r.max_length is not None:
                conds.append(F.char_length(v) <= r.max_length)
            if r.pattern is not None:
                conds.append(v.rlike(r.pattern))
            stored = v
        elif r.kind == "datetime":
            ts = v.try_cast("timestamp")
            conds += [v.rlike(ISO_DATETIME), ts.isNotNull()]
            stored = F.date_format(ts, TIMESTAMP_WRITE)
        elif r.kind == "date":
            d = v.try_cast("date")
            conds += [v.rlike(ISO_DATE), d.isNotNull()]
            stored = F.date_format(d, "yyyy-MM-dd")
        elif r.kind == "enum":
            conds.append(v.isin(list(r.values or ())))
            stored = v
        else:
            stored = v
        valid = F.lit(True)
        for c in conds:
            valid = valid & c
        if r.nullable and r.may_be_missing:
            field_ok = v.isNull() | F.coalesce(valid, F.lit(False))
        else:
            field_ok = v.isNotNull() & F.coalesce(valid, F.lit(False))
        ok = ok & field_ok
        out.append(stored.alias(r.name))
    return F.coalesce(ok, F.lit(False)), out

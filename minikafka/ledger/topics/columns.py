"""The one table that maps pydantic field types to typed SQLite columns, both ways.

Every model field becomes one column of a STRICT table. ``ColumnSpec`` holds what
the ledger needs to store a value exactly and read it back: the SQLite type, a
CHECK constraint, nullability, and (only where the raw Python value is not already
what SQLite stores) an encoder and a decoder.

| Python type             | SQLite column                      | stored as                        |
|-------------------------|------------------------------------|----------------------------------|
| int                     | INTEGER                            | 64-bit signed integer            |
| float                   | REAL                               | IEEE double; inf kept, NaN refused |
| str                     | TEXT                               | UTF-8 text                       |
| bool                    | INTEGER CHECK IN (0, 1)            | 0 / 1                            |
| datetime                | TEXT CHECK GLOB                    | UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` |
| date                    | TEXT CHECK GLOB                    | ``YYYY-MM-DD``                   |
| Decimal                 | TEXT                               | exact fixed-point text, within decimal(P, S) |
| Enum / Literal          | TEXT or INTEGER CHECK IN (values)  | the member's value               |
| bytes                   | BLOB                               | raw bytes                        |
| UUID, URL, time, ...    | TEXT                               | pydantic's JSON string form      |
| model, list, dict, set, union | TEXT CHECK json_valid        | JSON; NaN/inf inside refused     |

``Optional[X]`` (``X | None``) makes the column nullable; everything else is NOT NULL.

A value the ledger cannot store faithfully is refused at append (``InvalidRecordError``
naming the field path and the value), on every path: NaN in a float column (SQLite would
store NULL), NaN or infinity anywhere inside a JSON column (JSON has neither; pydantic
would write null, which the model then cannot read back), and a Decimal outside its
column's ``decimal(P, S)`` (``decimal_layout``: what Arrow's decimal128 and Spark hold).
"""

from __future__ import annotations

import enum
import json
import math
import types
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter

from ...errors import InvalidNameError, InvalidRecordError, UnsupportedTypeError
from ...util.clock import DATE_GLOB, TIMESTAMP_GLOB, format_timestamp, parse_timestamp
from .identifiers import quote_identifier, validate_field_name

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# Metadata columns every topic table carries. Model fields cannot start with "_",
# so these never collide with a field.
META_COLUMNS = ("_id", "_created_at", "_status", "_handled_at", "_parent_id", "_parent_topic", "_run_id")


@dataclass
class ColumnSpec:
    """How one model field is stored.

    ``kind`` is one of: int, float, str, bool, datetime, date, decimal, enum,
    bytes, text (string-like types such as UUID or URL), json.
    """

    name: str
    kind: str
    sql_type: str
    nullable: bool
    enum_values: list[Any] | None = None
    max_digits: int | None = None
    decimal_places: int | None = None
    json_schema: dict | None = None
    encode: Callable[[Any], Any] | None = field(default=None, repr=False, compare=False)
    decode: Callable[[Any], Any] | None = field(default=None, repr=False, compare=False)

    def describe(self) -> dict:
        """The JSON-serialisable part stored in the catalog (no callables)."""
        d = asdict(self)
        d.pop("encode")
        d.pop("decode")
        return d

    def ddl(self) -> str:
        """The column definition inside CREATE TABLE."""
        q = quote_identifier(self.name)
        parts = [q, self.sql_type]
        if not self.nullable:
            parts.append("NOT NULL")
        check = self.check_sql()
        if check and self.nullable:
            check = f"{q} IS NULL OR {check}"
        if check:
            parts.append(f"CHECK ({check})")
        return " ".join(parts)

    def check_sql(self) -> str | None:
        q = quote_identifier(self.name)
        if self.kind == "bool":
            return f"{q} IN (0, 1)"
        if self.kind == "datetime":
            return f"{q} GLOB '{TIMESTAMP_GLOB}'"
        if self.kind == "date":
            return f"{q} GLOB '{DATE_GLOB}'"
        if self.kind == "json":
            return f"json_valid({q})"
        if self.kind == "enum":
            # enum values are the model author's literals, rendered as SQL literals
            return f"{q} IN ({', '.join(_sql_literal(v) for v in self.enum_values or [])})"
        return None


def _sql_literal(value: Any) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    """Strip Annotated and Optional: return (inner type, nullable)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _unwrap_optional(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        args = get_args(annotation)
        rest = tuple(a for a in args if a is not type(None))
        nullable = len(rest) < len(args)
        if len(rest) == 1:
            inner, inner_nullable = _unwrap_optional(rest[0])
            return inner, nullable or inner_nullable
        return Union[rest], nullable  # noqa: UP007 - a real multi-type union
    return annotation, False


FLOAT_NAN_REFUSED = "SQLite stores NaN as NULL, so it is refused"
JSON_NON_FINITE_REFUSED = "JSON has no NaN or infinity (it would be stored as null), so it is refused"
MAX_DECIMAL_PRECISION = 38  # Arrow decimal128 and Spark DecimalType
DEFAULT_DECIMAL_SCALE = 18  # Spark's default scale, used when the field sets no decimal_places


def float_text(v: float) -> str:
    """NaN / Infinity / -Infinity (as Spark prints them), else repr."""
    if v != v:
        return "NaN"
    if v in (math.inf, -math.inf):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def _encode_float(v: float) -> float:
    if v != v:
        raise InvalidRecordError(f"value NaN: {FLOAT_NAN_REFUSED}")
    return v


def decimal_layout(max_digits: int | None, decimal_places: int | None) -> tuple[int, int]:
    """(precision, scale) of a Decimal column in Arrow and Spark.

    ``decimal_places`` unset: decimal(38, 18). Set: decimal(min(max_digits or 38, 38), places).
    """
    if decimal_places is None:
        return MAX_DECIMAL_PRECISION, DEFAULT_DECIMAL_SCALE
    precision = min(max_digits or MAX_DECIMAL_PRECISION, MAX_DECIMAL_PRECISION)
    return precision, min(decimal_places, precision)


def decimal_fits(v: Decimal, precision: int, scale: int) -> bool:
    """Whether a finite ``v`` is exactly representable in decimal(precision, scale)."""
    _sign, digits, exp = v.as_tuple()
    digits = list(digits)
    while len(digits) > 1 and digits[-1] == 0:  # trailing zeros change no value
        digits.pop()
        exp += 1
    if digits == [0]:
        return True
    places = max(0, -exp)
    whole = max(0, len(digits) + exp)
    return places <= scale and whole <= precision - scale


def decimal_refusal(text: str, precision: int, scale: int) -> str:
    return (f"value {text} does not fit the column's decimal({precision}, {scale}) (at most "
            f"{precision - scale} digits before the point and {scale} after: what Arrow and Spark hold), "
            "so it is refused")


def _decimal_encoder(precision: int, scale: int) -> Callable[[Decimal], str]:
    def encode(v: Decimal) -> str:
        if not v.is_finite():
            raise InvalidRecordError(f"value {v}: a non-finite Decimal cannot be stored, so it is refused")
        if not decimal_fits(v, precision, scale):
            raise InvalidRecordError(decimal_refusal(str(v), precision, scale))
        return format(v, "f")

    return encode


def key_path(key: Any) -> str:
    """``.key`` for an identifier-like key, else ``["key"]``."""
    if isinstance(key, str) and key.isascii() and key.isidentifier():
        return "." + key
    return json.dumps([key if isinstance(key, (str, int, float, bool)) or key is None else str(key)],
                      ensure_ascii=False)


def find_non_finite(value: Any, path: str) -> tuple[str, float] | None:
    """The first (path, value) of a NaN or infinite float inside ``value``, e.g. ``scores[2]``."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, value)
    if isinstance(value, BaseModel):
        value = dict(value)
    if isinstance(value, dict):
        for k, v in value.items():
            found = find_non_finite(v, path + key_path(k))
            if found:
                return found
    elif isinstance(value, (list, tuple, set, frozenset)):
        for i, v in enumerate(value):
            found = find_non_finite(v, f"{path}[{i}]")
            if found:
                return found
    return None


def json_refusal(path: str, value: float) -> str:
    return f"{path} is {float_text(value)}: {JSON_NON_FINITE_REFUSED}"


JSON_UNFAITHFUL_REFUSED = ("JSON cannot hold it faithfully (it would be read back as something else, or not at all), "
                           "so it is refused; use dicts with string keys, lists, strings, finite numbers, "
                           "booleans and None")


def json_value_refusal(value: Any, path: str = "$") -> str | None:
    """The one rule for schemaless JSON (stream appends, notification payloads, job results).

    Returns the reason the first value inside ``value`` that JSON cannot hold faithfully is
    refused, naming its path (``$.a.b``, ``$.items[2]``), or None when ``value`` is plain
    JSON: dicts with str keys, lists and tuples, str, int, finite float, bool and None.
    Refused: NaN and infinity, datetime/date/time, Decimal, set/frozenset, bytes, non-str
    dict keys, a container that holds itself, and every other object.
    """
    try:
        return _json_value_refusal(value, path, set())
    except RecursionError:
        return f"{path} is nested too deeply to be written as JSON"


def _json_value_refusal(value: Any, path: str, active: set[int]) -> str | None:
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else json_refusal(path, value)
    if isinstance(value, (dict, list, tuple)):
        if id(value) in active:
            return f"{path} holds itself (Circular reference): JSON cannot hold it"
        active.add(id(value))
        try:
            if isinstance(value, dict):
                for k, v in value.items():
                    if not isinstance(k, str):
                        return (f"{path} has the key {k!r:.80} of type {type(k).__name__}: JSON object keys are "
                                f"strings (it would be read back as a string), so it is refused")
                    found = _json_value_refusal(v, path + key_path(k), active)
                    if found:
                        return found
            else:
                for i, v in enumerate(value):
                    found = _json_value_refusal(v, f"{path}[{i}]", active)
                    if found:
                        return found
        finally:
            active.discard(id(value))
        return None
    return f"{path} is a {type(value).__name__} ({value!r:.80}): {JSON_UNFAITHFUL_REFUSED}"


def _decode_bool(v: Any) -> bool:
    return bool(v)


def _enum_value(v: Any) -> Any:
    return v.value if isinstance(v, enum.Enum) else v


def _enum_spec(name: str, values: list[Any], nullable: bool, decode=None) -> ColumnSpec:
    if all(isinstance(v, str) for v in values):
        sql_type = "TEXT"
    elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        sql_type = "INTEGER"
    else:
        raise UnsupportedTypeError(
            f"field {name!r}: enum/Literal values must be all str or all int, got {values!r}"
        )
    return ColumnSpec(
        name, "enum", sql_type, nullable, enum_values=list(values), encode=_enum_value, decode=decode
    )


def _decimal_constraints(field_info) -> tuple[int | None, int | None]:
    max_digits = decimal_places = None
    for item in getattr(field_info, "metadata", []) or []:
        max_digits = getattr(item, "max_digits", None) or max_digits
        places = getattr(item, "decimal_places", None)
        decimal_places = places if places is not None else decimal_places
    return max_digits, decimal_places


def column_for_field(name: str, annotation: Any, field_info=None, *, model: str = "") -> ColumnSpec:
    """Build the ColumnSpec of one model field.

    Raises:
        InvalidNameError: the field name is not a valid column name.
        UnsupportedTypeError: the type cannot be stored.
    """
    validate_field_name(name, model=model)
    inner, nullable = _unwrap_optional(annotation)
    origin = get_origin(inner)

    if origin is Literal:
        return _enum_spec(name, list(get_args(inner)), nullable)
    if isinstance(inner, type):
        if issubclass(inner, enum.Enum):
            return _enum_spec(name, [m.value for m in inner], nullable, decode=inner)
        if issubclass(inner, bool):
            return ColumnSpec(name, "bool", "INTEGER", nullable, decode=_decode_bool)
        if issubclass(inner, int):
            return ColumnSpec(name, "int", "INTEGER", nullable)
        if issubclass(inner, float):
            return ColumnSpec(name, "float", "REAL", nullable, encode=_encode_float)
        if issubclass(inner, str):
            return ColumnSpec(name, "str", "TEXT", nullable)
        if issubclass(inner, datetime):
            return ColumnSpec(
                name, "datetime", "TEXT", nullable, encode=format_timestamp, decode=parse_timestamp
            )
        if issubclass(inner, date):
            return ColumnSpec(
                name, "date", "TEXT", nullable, encode=date.isoformat, decode=date.fromisoformat
            )
        if issubclass(inner, Decimal):
            digits, places = _decimal_constraints(field_info)
            return ColumnSpec(
                name, "decimal", "TEXT", nullable, max_digits=digits, decimal_places=places,
                encode=_decimal_encoder(*decimal_layout(digits, places)), decode=Decimal,
            )
        if issubclass(inner, (bytes, bytearray)):
            return ColumnSpec(name, "bytes", "BLOB", nullable, encode=bytes)
        if issubclass(inner, uuid.UUID):
            return ColumnSpec(name, "text", "TEXT", nullable, encode=str, decode=uuid.UUID)
    return _adapter_column(name, inner, nullable)


def _adapter_column(name: str, inner: Any, nullable: bool) -> ColumnSpec:
    """String-like pydantic types become TEXT; everything else structured becomes JSON."""
    try:
        adapter = TypeAdapter(inner)
        schema = adapter.json_schema()
    except Exception as exc:  # pydantic raises several types for unsupported classes
        raise UnsupportedTypeError(
            f"field {name!r}: type {inner!r} cannot be stored in the ledger ({exc})"
        ) from exc
    if schema.get("type") == "string" and "enum" not in schema:
        def encode_text(v, _a=adapter):
            return _a.dump_python(v, mode="json")
        return ColumnSpec(name, "text", "TEXT", nullable, encode=encode_text)

    def encode_json(v, _a=adapter) -> str:
        text = _a.dump_json(v).decode("utf-8")
        if "null" in text:  # pydantic writes NaN and infinity as null: find and refuse them
            found = find_non_finite(_a.dump_python(v), name)
            if found is not None:
                raise InvalidRecordError(json_refusal(*found))
        return text

    return ColumnSpec(
        name, "json", "TEXT", nullable, json_schema=schema, encode=encode_json, decode=json.loads
    )


def columns_for_model(model: type[BaseModel]) -> list[ColumnSpec]:
    """The ColumnSpecs of every field of ``model``, in field order.

    Raises:
        InvalidNameError: a field name is invalid or two differ only in case.
        UnsupportedTypeError: a field type cannot be stored.
    """
    cols = [
        column_for_field(name, info.annotation, info, model=model.__name__)
        for name, info in model.model_fields.items()
    ]
    seen: dict[str, str] = {}
    for col in cols:
        low = col.name.lower()
        if low in seen:
            raise InvalidNameError(
                f"fields {seen[low]!r} and {col.name!r} on model {model.__name__} differ only in "
                "case; SQLite column names are case-insensitive"
            )
        seen[low] = col.name
    if not cols:
        raise UnsupportedTypeError(f"model {model.__name__} has no fields to store")
    return cols


def column_from_description(desc: dict) -> ColumnSpec:
    """Rebuild a ColumnSpec (with decoders, without model-specific classes) from the catalog."""
    spec = ColumnSpec(**desc)
    kind = spec.kind
    if kind == "bool":
        spec.decode = _decode_bool
    elif kind == "datetime":
        spec.decode = parse_timestamp
    elif kind == "date":
        spec.decode = date.fromisoformat
    elif kind == "decimal":
        spec.decode = Decimal
    elif kind == "json":
        spec.decode = json.loads
    return spec


def check_int_range(value: int, column: str) -> None:
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidRecordError(
            f"field {column!r}: {value} is outside the 64-bit integer range SQLite stores"
        )

"""Schema evolution of a topic: what a new model changes, and adding fields in place.

``compare(stored, given)`` sorts a model against what a topic stores, in Schema Registry's
terms:

- ``same``: nothing to do.
- ``additive`` (BACKWARD: the new model reads every stored row): the model only adds fields
  that are ``Optional`` or have a default. ``add_fields_in_current_transaction`` applies it in
  O(1): one ``ADD COLUMN`` per field (an old row reads NULL or the default; no row is
  rewritten) and the catalog row's schema, in the caller's transaction.
- ``older`` (FORWARD: an older model of an evolved topic): the model lacks fields the topic
  gained, all nullable or with a default. It reads the rows (without those fields) and
  appends them (the column takes NULL or its default): old code keeps working.
- ``rewrite``: a field removed, retyped, made required, a constraint changed: only
  ``Topic.migrate()`` (every row rewritten) applies it; ``changes`` says what it rewrites.

Why not always ``ALTER TABLE ADD COLUMN``: SQLite checks a new column's CHECK constraint
against every stored row (a full scan: 1.7 s at 10M rows), although an old row holds the
column's default, which is checked here once. A column with a CHECK (bool, datetime, date,
enum, JSON) is therefore added the way ``ADD COLUMN`` adds it, minus that scan: the table's
``CREATE TABLE`` text in ``sqlite_schema`` gains the column definition at its end and the
schema version is bumped (SQLite's documented procedure for changes ALTER TABLE does not
make, lang_altertable.html#otheralter), inside the same transaction, so a crash or a
rollback leaves the old schema. The status views select ``*`` and need no change.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidRecordError, SchemaMismatchError
from ...util.faults import checkpoint
from .columns import ColumnSpec
from .identifiers import quote_identifier
from .layout import TopicLayout, _strip_docs, canonical_json

SAME, ADDITIVE, OLDER, REWRITE = "same", "additive", "older", "rewrite"


@dataclass
class Evolution:
    """What a model changes in a stored topic (``compare``)."""

    topic: str
    kind: str  # same | additive | older | rewrite
    added: list[ColumnSpec] = field(default_factory=list)
    defaults: dict[str, Any] = field(default_factory=dict)  # added field -> stored default (None: NULL)
    missing: list[str] = field(default_factory=list)  # stored fields the model lacks (older)
    changes: list[str] = field(default_factory=list)  # what a rewrite changes, one line per field
    rows: int = 0  # rows a rewrite rewrites (set by the caller that counted them)

    def describe(self) -> list[str]:
        """One line per change, as the CLI prints them."""
        if self.kind == SAME:
            return [f"topic {self.topic!r}: the model matches the stored schema; nothing to do"]
        if self.kind == ADDITIVE:
            return [f"add field {c.name!r} ({c.kind}, {c.sql_type}{'' if c.nullable else ' NOT NULL'}), "
                    f"old rows read {_shown(self.defaults.get(c.name))}" for c in self.added]
        if self.kind == OLDER:
            return [f"topic {self.topic!r} has field {n!r} the model lacks: the model reads without it "
                    "and rows it appends store NULL or the default" for n in self.missing]
        return [*self.changes, f"a migration rewrites all {self.rows} row(s) of topic {self.topic!r} "
                "(Topic.migrate(NewModel, fn), one transaction)"]

    def hint(self) -> str:
        """What to do about a model that does not match the stored topic."""
        if self.kind == ADDITIVE:
            return (f"the model only adds optional fields: add them in place with 'minikafka evolve {self.topic} "
                    "--pipeline FILE' (or --model module:Class), or schema_changes = \"evolve\" on the pipeline "
                    "file's topic, or Source.evolve()")
        return (f"this change rewrites every row: 'minikafka evolve {self.topic} --model module:Class --dry-run' "
                "says what, Topic.migrate() applies it")


def _shown(value: Any) -> str:
    return "NULL" if value is None else f"the default {value!r}"


def compare(stored: TopicLayout, stored_fingerprint: str, given: TopicLayout,
            conn: sqlite3.Connection | None = None) -> Evolution:
    """How ``given`` (a model's layout) relates to the ``stored`` layout of the same topic.

    ``conn``: to read which stored columns have an SQL default (an older model may leave
    those out); without it, a field the stored schema gives a default counts.
    Dedup, key and partition differences are not evolutions: the caller refuses them first
    (``TopicLayout.mismatch``).
    """
    if stored_fingerprint == given.fingerprint:
        return Evolution(stored.name, SAME)
    old = {c.name: c for c in stored.columns}
    new = {c.name: c for c in given.columns}
    changes = []
    for name in old.keys() & new.keys():
        a, b = old[name].describe(), new[name].describe()
        if a != b:
            what = sorted(k for k in a if a[k] != b.get(k))
            changes.append(f"field {name!r} retyped ({', '.join(what)}: stored {_pick(a, what)}, "
                           f"model {_pick(b, what)})")
    added = [new[n] for n in new if n not in old]
    missing = [n for n in old if n not in new]
    if not changes and _common_schema(stored.json_schema, missing) != _common_schema(given.json_schema,
                                                                                    [c.name for c in added]):
        changes.append("a field's constraints or default differ (the model's JSON schema)")
    if added and missing:
        changes += [f"field {n!r} removed" for n in missing]
    if changes:
        return Evolution(stored.name, REWRITE, changes=sorted(changes))
    if missing:
        defaults = _sql_defaults(conn, stored.name) if conn is not None else None
        required = [n for n in missing if not old[n].nullable
                    and not (n in defaults if defaults is not None else _has_stored_default(stored, n))]
        if required:
            return Evolution(stored.name, REWRITE, changes=[f"field {n!r} removed" for n in missing])
        return Evolution(stored.name, OLDER, missing=missing)
    defaults = {}
    for col in added:
        default, problem = _default_of(given, col)
        if problem:
            changes.append(f"field {col.name!r} added: {problem}")
        else:
            defaults[col.name] = default
    if changes:
        return Evolution(stored.name, REWRITE, changes=changes)
    return Evolution(stored.name, ADDITIVE, added=added, defaults=defaults)


def _pick(desc: dict, keys: list[str]) -> str:
    return ", ".join(f"{desc.get(k)!r}" for k in keys)


def _sql_defaults(conn: sqlite3.Connection, table: str) -> set[str]:
    """The columns of ``table`` that have an SQL DEFAULT (those an insert may leave out)."""
    return {r[1] for r in conn.execute(f"PRAGMA table_info({quote_identifier(table)})") if r[4] is not None}


def _has_stored_default(stored: TopicLayout, name: str) -> bool:
    prop = stored.json_schema.get("properties", {}).get(name, {})
    return "default" in prop


def _common_schema(schema: dict, drop: list[str]) -> str:
    """The JSON schema without the fields in ``drop`` (and the $defs only they used), docs stripped."""
    body = _strip_docs(json.loads(canonical_json(schema)))
    props = body.get("properties", {})
    for name in drop:
        props.pop(name, None)
    if "required" in body:
        body["required"] = [n for n in body["required"] if n not in drop]
        if not body["required"]:
            del body["required"]
    defs = body.pop("$defs", None)
    if defs:
        used = _refs(body, defs)
        body["$defs"] = {k: v for k, v in defs.items() if k in used}
    return canonical_json(body)


def _refs(node: Any, defs: dict, seen: set | None = None) -> set:
    seen = set() if seen is None else seen
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.split("/")[-1]
            if name not in seen:
                seen.add(name)
                _refs(defs.get(name), defs, seen)
        for v in node.values():
            _refs(v, defs, seen)
    elif isinstance(node, list):
        for v in node:
            _refs(v, defs, seen)
    return seen


def _default_of(layout: TopicLayout, col: ColumnSpec) -> tuple[Any, str | None]:
    """The stored form of an added field's default (None: NULL), or why the field cannot be
    added in place."""
    info = layout.model.model_fields[col.name] if layout.model is not None else None
    if info is None or info.is_required():
        if col.nullable:
            return None, None
        return None, "it is required and has no default, so old rows would have no value " \
                     "(make it Optional or give it a default)"
    value = info.get_default(call_default_factory=True)
    if value is None:
        return None, None
    try:
        stored = col.encode(value) if col.encode else value
    except InvalidRecordError as exc:
        return None, f"its default cannot be stored ({exc})"
    if isinstance(stored, float) and not math.isfinite(stored):
        return None, "its default is not a finite number"
    if not isinstance(stored, (bool, int, float, str, bytes)):
        return None, f"its default {value!r} has no SQL form"
    return stored, None


def sql_literal(value: Any) -> str:
    """A stored value as an SQL constant (for a column's DEFAULT)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    return "'" + str(value).replace("'", "''") + "'"


def column_sql(col: ColumnSpec, default: Any) -> str:
    """The column definition an added field gets: as in CREATE TABLE, with its DEFAULT."""
    return col.ddl() + ("" if default is None else f" DEFAULT {sql_literal(default)}")


def _check_default(conn: sqlite3.Connection, col: ColumnSpec, default: Any) -> None:
    """Refuse a default the column's type or CHECK refuses (what ADD COLUMN's scan would find)."""
    if default is None:
        return
    q = quote_identifier(col.name)
    probe = f"CREATE TEMP TABLE \"_minikafka_evolve_probe\" ({column_sql(col, default)}) STRICT"
    try:
        conn.execute(probe)
        conn.execute('INSERT INTO "_minikafka_evolve_probe" DEFAULT VALUES')
        conn.execute(f'SELECT {q} FROM "_minikafka_evolve_probe"').fetchone()
    except sqlite3.Error as exc:
        raise SchemaMismatchError(f"field {col.name!r}: its default {default!r} does not fit the column ({exc})") \
            from None
    finally:
        conn.execute('DROP TABLE IF EXISTS temp."_minikafka_evolve_probe"')


def add_fields_in_current_transaction(conn: sqlite3.Connection, plan: Evolution, layout: TopicLayout,
                                      model_name: str, now: str) -> None:
    """Add the ``plan``'s fields to the topic's table and record ``layout`` (the new model's)
    in the catalog, in the caller's transaction: O(1) whatever the row count.

    Raises:
        SchemaMismatchError: the plan is not additive, or a default does not fit its column.
    """
    if plan.kind != ADDITIVE:
        raise SchemaMismatchError(f"topic {plan.topic!r}: not an additive change ({plan.kind})")
    for col in plan.added:
        default = plan.defaults.get(col.name)
        _check_default(conn, col, default)
        if col.check_sql() is None:
            conn.execute(f"ALTER TABLE {quote_identifier(plan.topic)} ADD COLUMN {column_sql(col, default)}")
        else:
            _append_column(conn, plan.topic, column_sql(col, default))
        checkpoint("evolve:column-added")
    conn.execute(
        "UPDATE _minikafka_topics SET model_name = ?, json_schema = ?, fingerprint = ?, columns = ? WHERE name = ?",
        (model_name, canonical_json(layout.json_schema), layout.fingerprint, layout.describe_columns(), plan.topic))
    checkpoint("evolve:catalog-updated")


def _append_column(conn: sqlite3.Connection, table: str, coldef: str) -> None:
    """``ADD COLUMN`` without its scan of the stored rows (see the module docstring)."""
    row = conn.execute("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", (table,)).fetchone()
    sql = row[0]
    end = sql.rfind(")")
    if end < 0 or sql[end + 1:].strip().upper() != "STRICT":
        raise SchemaMismatchError(f"topic {table!r}: its table's definition has an unexpected form; "
                                  "migrate it instead")
    version = conn.execute("PRAGMA schema_version").fetchone()[0]
    conn.execute("PRAGMA writable_schema = ON")
    try:
        conn.execute("UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = ?",
                     (sql[:end].rstrip() + ", " + coldef + "\n" + sql[end:], table))
        conn.execute(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")
    name = coldef.split('"')[1]
    if name not in {r[1] for r in conn.execute(f"PRAGMA table_info({quote_identifier(table)})")}:
        raise SchemaMismatchError(f"topic {table!r}: adding field {name!r} failed; nothing was changed")


def rewrite_rows(conn: sqlite3.Connection, topic: str) -> int:
    """How many rows a rewrite (``Topic.migrate``) of ``topic`` would rewrite."""
    return conn.execute(f"SELECT count(*) FROM {quote_identifier(topic)}").fetchone()[0]


# -- fields an extra="allow" model kept (unknown_fields = "evolve") ---------------------------
_INFERRED = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"))


def infer_column(name: str, value: Any) -> ColumnSpec:
    """The nullable column a kept field gets from its first value: bool, int, float or str,
    anything else (a list, an object, null) JSON.

    Raises:
        InvalidNameError: the field name cannot be a column name.
    """
    from typing import Any as AnyType

    from .columns import column_for_field

    annotation: Any = AnyType
    for py, _kind in _INFERRED:
        if isinstance(value, py):
            annotation = py | None
            break
    col = column_for_field(name, annotation)
    col.nullable = True
    return with_extra_encoder(col)


def with_extra_encoder(col: ColumnSpec) -> ColumnSpec:
    """``col`` with an encoder that checks a kept field's value (pydantic validates no extra
    field): a value of another type than the column's is a bad row naming the field."""
    kind, inner = col.kind, col.encode

    def encode(value: Any) -> Any:
        if kind == "bool":
            ok = isinstance(value, bool)
        elif kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "float":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif kind == "str":
            ok = isinstance(value, str)
        else:
            ok = True
        if not ok:
            raise InvalidRecordError(f"{value!r} is not a {kind}, the type the field's column got from its first "
                                     "value")
        if kind == "json":
            try:
                return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
            except (TypeError, ValueError) as exc:
                raise InvalidRecordError(f"{value!r} cannot be stored as JSON ({exc})") from None
        return inner(value) if inner else value

    col.encode = encode
    return col


def add_kept_fields_in_current_transaction(conn: sqlite3.Connection, layout: TopicLayout,
                                           columns: list[ColumnSpec]) -> None:
    """Give each field an ``extra="allow"`` model kept a nullable column of its own, in O(1),
    and record it in the catalog's columns (the model's schema and fingerprint stay: the
    field is no field of the model), in the caller's transaction; ``layout`` gains them."""
    table = quote_identifier(layout.name)
    for col in columns:
        if col.check_sql() is None:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column_sql(col, None)}")
        else:
            _append_column(conn, layout.name, column_sql(col, None))
    layout.add_columns(columns)
    conn.execute("UPDATE _minikafka_topics SET columns = ? WHERE name = ?", (layout.describe_columns(), layout.name))
    checkpoint("evolve:kept-fields-added")


def bind_kept_fields(layout: TopicLayout, stored: TopicLayout) -> None:
    """Give the layout of an ``extra="allow"`` model the columns of the fields it kept before
    (stored columns that are no field of the model), so it reads and writes them."""
    fields = set(layout.field_names)
    kept = [with_extra_encoder(c) for c in stored.columns if c.name not in fields and c.nullable]
    if kept:
        layout.add_columns(kept)

"""The topic catalog: which topics the file holds, their layout, and creating one."""

from __future__ import annotations

import json
import sqlite3

from pydantic import BaseModel

from ...errors import InvalidNameError, SchemaMismatchError, TopicNotFoundError
from ...util.clock import utc_now
from . import evolution
from .identifiers import validate_topic_name
from .layout import TopicLayout, canonical_json
from .status import consumers_view_name, status_view_name

CATALOG_SELECT = (
    "SELECT name, json_schema, columns, dedup, fingerprint, partitions, key FROM _minikafka_topics WHERE name = ?"
)


def model_path(model: type[BaseModel]) -> str:
    """``module:QualName``: how the catalog records a topic's model."""
    return f"{model.__module__}:{model.__qualname__}"


def topic_names(conn: sqlite3.Connection) -> list[str]:
    """Names of every topic stored in the file, sorted."""
    return [r[0] for r in conn.execute("SELECT name FROM _minikafka_topics ORDER BY name")]


def table_sql(conn: sqlite3.Connection, name: str) -> list[str]:
    """The CREATE statements of topic ``name``'s table, its indexes and trigger (as SQLite keeps them)."""
    return [r[0] for r in conn.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL ORDER BY type DESC, name", (name,))]


def catalog_row(conn: sqlite3.Connection, name: str) -> tuple | None:
    """The catalog row of ``name`` (name, json_schema, columns, dedup, fingerprint, partitions, key), or None."""
    return conn.execute(CATALOG_SELECT, (name,)).fetchone()


def read_layout(conn: sqlite3.Connection, name: str, *, where: str = "the ledger") -> TopicLayout:
    """The stored layout of a topic (no model class needed).

    Raises:
        TopicNotFoundError: no such topic in the file.
    """
    validate_topic_name(name)
    row = catalog_row(conn, name)
    if row is None:
        raise TopicNotFoundError(f"no topic {name!r} in {where} (topics: {topic_names(conn)!r})")
    return layout_of_row(row)


def layout_of_row(row: tuple) -> TopicLayout:
    """The stored layout from a catalog row (see ``catalog_row``)."""
    return TopicLayout.from_catalog(row[:4], partitions=row[5], key=json.loads(row[6]))


def stored_model_path(conn: sqlite3.Connection, name: str) -> str:
    """The ``module:QualName`` the catalog recorded for a topic's model."""
    return conn.execute("SELECT model_name FROM _minikafka_topics WHERE name = ?", (name,)).fetchone()[0]


def created_at(conn: sqlite3.Connection, name: str) -> str:
    """When the topic was created (its catalog row's timestamp text)."""
    return conn.execute("SELECT created_at FROM _minikafka_topics WHERE name = ?", (name,)).fetchone()[0]


def record_migration_in_current_transaction(conn: sqlite3.Connection, layout: TopicLayout, model_name: str,
                                            now: str) -> None:
    """The catalog row of a migrated topic: its new model, schema, fingerprint and columns."""
    conn.execute(
        "UPDATE _minikafka_topics SET model_name = ?, json_schema = ?, fingerprint = ?, "
        "columns = ?, migrated_at = ? WHERE name = ?",
        (model_name, canonical_json(layout.json_schema), layout.fingerprint, layout.describe_columns(), now,
         layout.name),
    )


def check_reopen(layout: TopicLayout, row: tuple, conn: sqlite3.Connection | None = None) -> None:
    """Raise unless ``layout`` matches the stored catalog ``row`` of the same topic.

    A model older than the stored schema (it lacks fields the topic gained by evolution,
    all nullable or with a default) matches: it reads without them and appends NULL or the
    default (``evolution``). ``conn``: to read the table's column defaults.

    Raises:
        InvalidNameError: the names differ only by case.
        SchemaMismatchError: another schema or other dedup fields; the message says whether
            the change can be applied in place (``minikafka evolve``) or needs a migration.
    """
    stored_name = row[0]
    if stored_name != layout.name:
        raise InvalidNameError(
            f"topic {layout.name!r} clashes with existing topic {stored_name!r}: "
            "topic names are case-insensitive"
        )
    stored = layout_of_row(row)
    why = layout.mismatch(stored, row[4])
    if not why:
        return
    if why.startswith(("dedup", "partition", "key")):
        what = "dedup config" if why.startswith("dedup") else "schema"
        raise SchemaMismatchError(
            f"topic {layout.name!r} exists with a different {what} ({why}); "
            "reopen it with the stored model and dedup, or change the model with Topic.migrate()"
        )
    plan = evolution.compare(stored, row[4], layout, conn)
    if plan.kind in (evolution.SAME, evolution.OLDER):
        return
    raise SchemaMismatchError(f"topic {layout.name!r} exists with a different schema ({why}); {plan.hint()}")


def check_model(conn: sqlite3.Connection, stored: TopicLayout, model: type[BaseModel]) -> TopicLayout:
    """The layout of ``model`` as the stored topic ``stored``, checked as reopening the topic
    with it checks it (no Topic is opened).

    Raises:
        SchemaMismatchError: the model does not match what the topic stores.
    """
    layout = TopicLayout.for_model(stored.name, model, stored.dedup or None, partitions=stored.partitions,
                                   key=stored.key or None)
    row = catalog_row(conn, stored.name)
    if row is None:
        raise TopicNotFoundError(f"topic {stored.name!r} is not in the ledger")
    check_reopen(layout, row, conn)
    return layout


def create_topic_in_current_transaction(conn: sqlite3.Connection, layout: TopicLayout) -> None:
    """Write the catalog row and the topic's table and indexes (the caller commits).

    Raises:
        InvalidNameError: a table of that name (or one of its index names) exists already.
    """
    clash = conn.execute(
        "SELECT name FROM sqlite_schema WHERE lower(name) IN (lower(?), lower(?), lower(?), lower(?))",
        (layout.name, layout.name + "__new", layout.name + "__dedup", layout.name + "__append_only"),
    ).fetchone() or conn.execute(
        "SELECT name FROM sqlite_schema WHERE lower(name) IN (lower(?), lower(?), lower(?))",
        (layout.name + "__partition", status_view_name(layout.name), consumers_view_name(layout.name))).fetchone()
    if clash:
        raise InvalidNameError(f"topic {layout.name!r} clashes with existing table {clash[0]!r}")
    conn.execute(
        "INSERT INTO _minikafka_topics (name, model_name, json_schema, fingerprint, columns, dedup, created_at, "
        "partitions, key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (layout.name, model_path(layout.model), canonical_json(layout.json_schema), layout.fingerprint,
         layout.describe_columns(), canonical_json(list(layout.dedup)), utc_now(), layout.partitions,
         canonical_json(list(layout.key))),
    )
    for statement in layout.ddl():
        conn.execute(statement)
    conn.executemany(
        "INSERT OR IGNORE INTO _minikafka_partitions (topic, partition, handled_upto) VALUES (?, ?, 0)",
        [(layout.name, p) for p in range(layout.partitions)],
    )

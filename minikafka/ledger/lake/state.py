"""The lake's rows in the ledger: the Iceberg catalog's tables and what each lake target holds.

Two tables have pyiceberg's names and shape (``SqlCatalog``'s v1 schema), so pyiceberg,
DuckDB or any SQL-catalog reader pointed at the ledger file finds the tables without a
server: ``iceberg_tables`` (one row per table: namespace, name, the current metadata file)
and ``iceberg_namespace_properties``. A commit of an Iceberg table is the conditional UPDATE
of its row (``swap_pointer_in_current_transaction``), run in the same transaction as the
stage's outputs, acks and run row: the table and the ledger commit together or not at all.

``_minikafka_lake_targets`` records each declared target (format, topic, location,
partitioning) and how far it holds the topic (``last_id``, the highest row id written, with
the snapshot and run that wrote it); a sync writes exactly the rows above it.

The tables are made on first use (``ensure_tables``) by a ledger that writes a lake target,
not by every ledger: a ledger without the ``lake`` extra never holds them. Crash contract:
every function here runs in the caller's transaction; nothing is written outside it.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from ...errors import ConcurrentRunError, LakeConfigError

# pyiceberg 0.12's SqlCatalog tables, v1 schema (with iceberg_type), byte for byte its column names
DDL = (
    "CREATE TABLE IF NOT EXISTS iceberg_tables ("
    " catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL,"
    " table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000),"
    " previous_metadata_location VARCHAR(1000), iceberg_type VARCHAR(5),"
    " PRIMARY KEY (catalog_name, table_namespace, table_name))",
    "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties ("
    " catalog_name VARCHAR(255) NOT NULL, namespace VARCHAR(255) NOT NULL,"
    " property_key VARCHAR(255) NOT NULL, property_value VARCHAR(1000) NOT NULL,"
    " PRIMARY KEY (catalog_name, namespace, property_key))",
    "CREATE TABLE IF NOT EXISTS _minikafka_lake_targets ("
    " name TEXT PRIMARY KEY, format TEXT NOT NULL, topic TEXT NOT NULL, location TEXT NOT NULL,"
    " namespace TEXT NOT NULL, partition_by TEXT NOT NULL, last_id INTEGER NOT NULL DEFAULT 0,"
    " snapshot_id INTEGER, run_id TEXT, created_at TEXT NOT NULL, updated_at TEXT) STRICT",
)


@dataclass(frozen=True)
class TargetRow:
    """One declared lake target and how far it holds its topic."""

    name: str
    format: str
    topic: str
    location: str
    namespace: str
    partition_by: tuple[str, ...]
    last_id: int = 0
    snapshot_id: int | None = None
    run_id: str | None = None
    updated_at: str | None = None


_COLUMNS = "name, format, topic, location, namespace, partition_by, last_id, snapshot_id, run_id, updated_at"


def _target(row: tuple) -> TargetRow:
    return TargetRow(row[0], row[1], row[2], row[3], row[4], tuple(json.loads(row[5])), row[6], row[7], row[8],
                     row[9])


def ensure_tables(conn: sqlite3.Connection) -> None:
    """Make the catalog's and the targets' tables when missing (in the caller's transaction)."""
    for statement in DDL:
        conn.execute(statement)


def has_tables(conn: sqlite3.Connection) -> bool:
    """True once a lake target was ever declared in this ledger."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_minikafka_lake_targets'"
                        ).fetchone() is not None


def declare_target_in_current_transaction(conn: sqlite3.Connection, target: TargetRow, now: str) -> TargetRow:
    """Record ``target`` (first time) or check it against its record; return the stored row.

    Raises:
        LakeConfigError: the target exists with another format, topic, location or partitioning.
    """
    ensure_tables(conn)
    conn.execute(
        "INSERT INTO _minikafka_lake_targets (name, format, topic, location, namespace, partition_by, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
        (target.name, target.format, target.topic, target.location, target.namespace,
         json.dumps(list(target.partition_by)), now))
    stored = read_target(conn, target.name)
    assert stored is not None
    for what in ("format", "topic", "location", "namespace", "partition_by"):
        if getattr(stored, what) != getattr(target, what):
            raise LakeConfigError(
                f"lake target {target.name!r} holds {what} {getattr(stored, what)!r}, not {getattr(target, what)!r}: "
                "a target's definition cannot change (declare a new target name)")
    return stored


def read_target(conn: sqlite3.Connection, name: str) -> TargetRow | None:
    if not has_tables(conn):
        return None
    row = conn.execute(f"SELECT {_COLUMNS} FROM _minikafka_lake_targets WHERE name = ?", (name,)).fetchone()
    return _target(row) if row else None


def list_targets(conn: sqlite3.Connection) -> list[TargetRow]:
    if not has_tables(conn):
        return []
    return [_target(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM _minikafka_lake_targets ORDER BY name")]


def record_sync_in_current_transaction(conn: sqlite3.Connection, name: str, last_id: int, snapshot_id: int | None,
                                       run_id: str | None, now: str) -> None:
    conn.execute("UPDATE _minikafka_lake_targets SET last_id = ?, snapshot_id = ?, run_id = ?, updated_at = ? "
                 "WHERE name = ?", (last_id, snapshot_id, run_id, now, name))


def read_pointer(conn: sqlite3.Connection, catalog: str, namespace: str, table: str) -> str | None:
    """The table's current metadata file (None: no such table)."""
    row = conn.execute("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
                       "AND table_name = ?", (catalog, namespace, table)).fetchone()
    return row[0] if row else None


def previous_pointer(conn: sqlite3.Connection, catalog: str, namespace: str, table: str) -> str | None:
    row = conn.execute("SELECT previous_metadata_location FROM iceberg_tables WHERE catalog_name = ? AND "
                       "table_namespace = ? AND table_name = ?", (catalog, namespace, table)).fetchone()
    return row[0] if row else None


def create_pointer_in_current_transaction(conn: sqlite3.Connection, catalog: str, namespace: str, table: str,
                                          location: str) -> None:
    """The catalog row of a new table (and its namespace's, as pyiceberg's SqlCatalog keeps it).

    Raises:
        ConcurrentRunError: another run created the table meanwhile.
    """
    ensure_tables(conn)
    conn.execute("INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) "
                 "VALUES (?, ?, 'exists', 'true') ON CONFLICT DO NOTHING", (catalog, namespace))
    try:
        conn.execute("INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, "
                     "previous_metadata_location, iceberg_type) VALUES (?, ?, ?, ?, NULL, 'TABLE')",
                     (catalog, namespace, table, location))
    except sqlite3.IntegrityError:
        raise ConcurrentRunError(f"Iceberg table {namespace}.{table} was created by another run meanwhile; "
                                 "nothing was committed, re-run") from None


def swap_pointer_in_current_transaction(conn: sqlite3.Connection, catalog: str, namespace: str, table: str,
                                        old: str, new: str) -> None:
    """Point the table at ``new`` if it still points at ``old`` (the Iceberg commit).

    Raises:
        ConcurrentRunError: the table moved on since ``old`` was read (nothing is committed).
    """
    changed = conn.execute(
        "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? WHERE catalog_name = ? "
        "AND table_namespace = ? AND table_name = ? AND metadata_location = ?",
        (new, old, catalog, namespace, table, old)).rowcount
    if changed != 1:
        raise ConcurrentRunError(f"Iceberg table {namespace}.{table} was committed by another writer meanwhile; "
                                 "nothing was committed, re-run")

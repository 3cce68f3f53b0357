"""Iceberg tables whose catalog lives in the ledger: written inside the ledger's own commit.

A lake target mirrors one topic into an Iceberg table (``IcebergTarget``: its name, the
topic, the table's location, a local directory or an object-store URI, and its partitioning).
``sync_in_current_transaction`` runs inside a ledger write transaction (a stage's commit,
through ``lake_finisher``, or ``sync`` on its own) and

1. takes the topic's rows above what the target holds (``last_id``) up to the topic's last
   row, so the rows the same transaction just inserted are among them: from the stage's
   insert itself when that stored every staged row, in order, right above ``last_id``
   (``LakeFinisher`` watches the insert, converts each batch as ``rows.arrow_batches``
   would read it back and writes the data files in a worker thread while SQLite inserts the
   next batch: ``datafiles``), else read back from the topic, a batch at a time;
2. writes their Parquet data files (``datafiles.DataFileWriter``, as pyiceberg's append
   writes them), then the manifests and manifest list (pyiceberg);
3. writes the table's next metadata file;
4. swaps the catalog's pointer row (``iceberg_tables``, a conditional UPDATE) and moves
   ``last_id``, in the caller's transaction.

Crash contract: before the transaction's COMMIT nothing points at the new files (the pointer
row and ``last_id`` roll back with the stage's outputs and acks); a re-run writes the rows
again into new files and the files of the attempt that died are orphans (those of a watch
given up, or of a commit that failed before its snapshot, are deleted at once), which
``orphan_files``/``remove_orphans`` find and delete. After the COMMIT the table and the ledger
hold the same rows, exactly once. The files are written while the transaction holds the
ledger's write lock, so a file no snapshot refers to while the lock is held is an orphan:
cleaning is safe while runs commit.

Schema from the model, types exact: ``_id`` (the topic's offset, a long) then one column per
field: int long, float double, str string, bool boolean, datetime timestamptz (microseconds,
UTC), date date, Decimal decimal(P, S), bytes binary, enum its value's type; nested models,
lists and dicts are JSON text (string), as the ledger stores them.

pyiceberg is imported only here (extra ``lake``).
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ...errors import LakeConfigError, LakeError
from ...util.clock import utc_now
from ...util.faults import checkpoint
from ...util.optional import require
from ..consuming.runlog import RunResult
from ..topics.catalog import read_layout
from ..topics.columns import decimal_layout
from ..topics.identifiers import validate_field_name
from ..topics.layout import TopicLayout
from ..topics.table import TopicTable
from . import delta, parquet, state
from .datafiles import DataFileWriter
from .rows import SyncResult, arrow_batches, arrow_schema, staged_arrow_batch

CATALOG = "minikafka"  # the catalog name readers pass to pyiceberg's SqlCatalog
NAMESPACE = "minikafka"
TRANSFORMS = ("identity", "year", "month", "day", "hour")
_PARTITION = re.compile(r"^\s*(?:(year|month|day|hour)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)|([A-Za-z_][A-Za-z0-9_]*))\s*$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass(frozen=True)
class IcebergTarget:
    """An Iceberg table that mirrors a topic (its rows, exactly once).

    Args:
        name: the table's name in the catalog (letters, digits, ``_``).
        topic: the topic whose rows it holds.
        location: the table's directory (a local path, made absolute) or an object-store URI.
        partition_by: partition fields: a column (identity) or ``year(col)``, ``month(col)``,
            ``day(col)``, ``hour(col)``.
        namespace: the catalog namespace (default ``minikafka``).
    """

    name: str
    topic: str
    location: str
    partition_by: tuple[str, ...] = ()
    namespace: str = NAMESPACE
    properties: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for what, value in (("name", self.name), ("namespace", self.namespace)):
            if not isinstance(value, str) or not _NAME.match(value):
                raise LakeConfigError(f"lake target {self.name!r}: {what} {value!r} must be letters, digits and _")
        if not self.location:
            raise LakeConfigError(f"lake target {self.name!r}: location is empty")
        if not urlparse(self.location).scheme or len(urlparse(self.location).scheme) == 1:  # a path (or C:\)
            object.__setattr__(self, "location", str(Path(self.location).expanduser().resolve()))
        if isinstance(self.partition_by, str):
            object.__setattr__(self, "partition_by", (self.partition_by,))
        object.__setattr__(self, "partition_by", tuple(self.partition_by))
        for spec in self.partition_by:
            if not isinstance(spec, str) or not _PARTITION.match(spec):
                raise LakeConfigError(f"lake target {self.name!r}: partition_by {spec!r} is not a column or "
                                      "year(col)/month(col)/day(col)/hour(col)")

    @property
    def identifier(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def row(self) -> state.TargetRow:
        return state.TargetRow(self.name, "iceberg", self.topic, self.location, self.namespace, self.partition_by)


def _pyiceberg():
    return require("pyiceberg", "lake")


# -- schema --------------------------------------------------------------------------------

def _iceberg_type(col) -> Any:
    t = require("pyiceberg.types", "lake")
    kind = col.kind
    if kind == "int" or (kind == "enum" and col.sql_type == "INTEGER"):
        return t.LongType()
    if kind == "float":
        return t.DoubleType()
    if kind == "bool":
        return t.BooleanType()
    if kind == "datetime":
        return t.TimestamptzType()
    if kind == "date":
        return t.DateType()
    if kind == "decimal":
        return t.DecimalType(*decimal_layout(col.max_digits, col.decimal_places))
    if kind == "bytes":
        return t.BinaryType()
    return t.StringType()  # str, text, enum of strings, json


def iceberg_schema(layout: TopicLayout) -> Any:
    """The Iceberg schema of a topic's lake table: ``_id`` then the model's fields, types exact."""
    t = require("pyiceberg.types", "lake")
    schema = require("pyiceberg.schema", "lake")
    fields = [t.NestedField(1, "_id", t.LongType(), required=True)]
    for i, col in enumerate(layout.columns, start=2):
        fields.append(t.NestedField(i, col.name, _iceberg_type(col), required=not col.nullable))
    return schema.Schema(*fields)


def partition_spec(target: IcebergTarget, schema: Any) -> Any:
    """The partition spec of ``target.partition_by`` over ``schema``.

    Raises:
        LakeConfigError: a partition column is not a field of the topic's model.
    """
    p = require("pyiceberg.partitioning", "lake")
    tr = require("pyiceberg.transforms", "lake")
    fields = []
    for i, spec in enumerate(target.partition_by):
        m = _PARTITION.match(spec)
        transform, column = (m.group(1), m.group(2)) if m.group(1) else ("identity", m.group(3))
        validate_field_name(column)
        try:
            source = schema.find_field(column)
        except ValueError:
            raise LakeConfigError(f"lake target {target.name!r}: partition column {column!r} is not a field of "
                                  f"topic {target.topic!r}") from None
        make = {"identity": tr.IdentityTransform, "year": tr.YearTransform, "month": tr.MonthTransform,
                "day": tr.DayTransform, "hour": tr.HourTransform}[transform]
        name = column if transform == "identity" else f"{column}_{transform}"
        fields.append(p.PartitionField(source_id=source.field_id, field_id=1000 + i, transform=make(), name=name))
    return p.PartitionSpec(*fields)


# -- the catalog a commit writes through ------------------------------------------------------

@functools.cache
def _catalog_class():
    sql = require("pyiceberg.catalog.sql", "lake")
    base = require("pyiceberg.catalog", "lake")
    table_mod = require("pyiceberg.table", "lake")
    serializers = require("pyiceberg.serializers", "lake")
    exceptions = require("pyiceberg.exceptions", "lake")
    io = require("pyiceberg.io", "lake")

    class LedgerCatalog(sql.SqlCatalog):
        """pyiceberg's SQL catalog on the ledger's open connection, inside its transaction: a
        load reads the pointer row this transaction sees, a commit writes the metadata file and
        swaps the pointer row without committing (the ledger's COMMIT does)."""

        def __init__(self, conn: sqlite3.Connection, **properties: str):
            base.MetastoreCatalog.__init__(self, CATALOG, **properties)
            self._conn = conn

        def load_table(self, identifier):
            namespace, name = self._split(identifier)
            location = state.read_pointer(self._conn, self.name, namespace, name)
            if location is None:
                raise exceptions.NoSuchTableError(f"Table does not exist: {namespace}.{name}")
            file_io = io.load_file_io(properties=self.properties, location=location)
            metadata = serializers.FromInputFile.table_metadata(file_io.new_input(location))
            return table_mod.Table(identifier=(namespace, name), metadata=metadata, metadata_location=location,
                                   io=self._load_file_io(metadata.properties, location), catalog=self)

        def commit_table(self, table, requirements, updates):
            checkpoint("lake:after-data-files")
            namespace, name = self._split(table.name())
            current = self.load_table((namespace, name))
            staged = self._update_and_stage_table(current, (namespace, name), requirements, updates)
            self._write_metadata(metadata=staged.metadata, io=staged.io, metadata_path=staged.metadata_location)
            checkpoint("lake:after-metadata")
            state.swap_pointer_in_current_transaction(self._conn, self.name, namespace, name,
                                                      current.metadata_location, staged.metadata_location)
            checkpoint("lake:after-pointer-swap")
            return table_mod.CommitTableResponse(metadata=staged.metadata,
                                                 metadata_location=staged.metadata_location)

        def create_in_current_transaction(self, target: IcebergTarget, schema, spec):
            metadata_mod = require("pyiceberg.table.metadata", "lake")
            locations = require("pyiceberg.table.locations", "lake")
            location = target.location.rstrip("/")
            provider = locations.load_location_provider(table_location=location, table_properties=target.properties)
            metadata_location = provider.new_table_metadata_file_location()
            metadata = metadata_mod.new_table_metadata(location=location, schema=schema, partition_spec=spec,
                                                       sort_order=require("pyiceberg.table.sorting", "lake")
                                                       .UNSORTED_SORT_ORDER, properties=target.properties)
            self._write_metadata(metadata, io.load_file_io(self.properties, metadata_location), metadata_location)
            state.create_pointer_in_current_transaction(self._conn, self.name, target.namespace, target.name,
                                                        metadata_location)

        @staticmethod
        def _split(identifier) -> tuple[str, str]:
            parts = tuple(identifier) if not isinstance(identifier, str) else tuple(identifier.split("."))
            if len(parts) > 2 and parts[0] == CATALOG:
                parts = parts[1:]
            return ".".join(parts[:-1]), parts[-1]

    return LedgerCatalog


# -- sync --------------------------------------------------------------------------------------

class _Watched:
    """The rows a stage's commit stored into a target's topic, written to data files as the
    insert goes (``LakeFinisher.watch_output``): usable by the sync only when the commit
    stored every staged row, in order, right above what the table holds."""

    def __init__(self, conn: sqlite3.Connection, target: IcebergTarget, layout: TopicLayout):
        self.conn, self.target, self.layout = conn, target, layout
        self.schema = arrow_schema(layout)
        self.first: int | None = None  # the id of the first row written
        self.next: int | None = None  # the id the next batch must start at
        self.writer: DataFileWriter | None = None
        self.exact = True
        self.taken = False  # its files went into the sync's snapshot (committed or orphaned with it)

    def __call__(self, batch, first_id: int | None) -> None:
        if not self.exact or batch.num_rows == 0:
            return
        try:
            if first_id is None or (self.next is not None and first_id != self.next):
                self.give_up()
                return
            rows = staged_arrow_batch(self.layout, self.schema, batch, first_id)
            if rows is None:
                self.give_up()
                return
            if self.writer is None and not self._start(first_id):
                return
            self.writer.add(rows)
            self.next = first_id + batch.num_rows
        except Exception:  # the sync reads the rows back, and names any error it meets there
            self.give_up()

    def _start(self, first_id: int) -> bool:
        stored = state.declare_target_in_current_transaction(self.conn, self.target.row(), utc_now())
        if first_id != stored.last_id + 1:  # the table lacks rows below these: the sync reads them all back
            self.give_up()
            return False
        checkpoint("lake:before-data-files")
        table = _load_or_create(self.conn, self.target, self.layout)
        _check_rows_schema(table, self.schema)
        self.writer = DataFileWriter(table, self.schema)
        self.first = first_id
        return True

    def give_up(self) -> None:
        """Write no more; delete the files written unless a snapshot took them."""
        self.exact = False
        if self.writer is not None and not self.taken:
            self.writer.discard()
        self.writer = None

    def data_files(self, after: int, upto: int) -> list | None:
        """The data files of rows ``(after, upto]`` when this holds exactly those; else None
        (and the files written, if any, are deleted)."""
        if self.exact and self.writer is not None and self.first == after + 1 and self.next == upto + 1:
            try:
                files = self.writer.finish()
            except Exception:  # noqa: BLE001 - read back instead; an error of the rows is raised there
                pass
            else:
                self.taken = True
                return files
        self.give_up()
        return None


def _load_or_create(conn: sqlite3.Connection, target: IcebergTarget, layout: TopicLayout):
    catalog = _catalog_class()(conn)
    if state.read_pointer(conn, CATALOG, target.namespace, target.name) is None:
        schema = iceberg_schema(layout)
        catalog.create_in_current_transaction(target, schema, partition_spec(target, schema))
    return catalog.load_table(target.identifier)


def _check_rows_schema(table, schema) -> None:
    """pyiceberg's check of an append's Arrow schema against the table's (as ``Table.append``)."""
    pio = require("pyiceberg.io.pyarrow", "lake")
    tables = require("pyiceberg.table", "lake")
    config = require("pyiceberg.utils.config", "lake")
    pio._check_pyarrow_schema_compatible(
        table.metadata.schema(), provided_schema=schema,
        downcast_ns_timestamp_to_us=config.Config().get_bool(tables.DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE) or False,
        format_version=table.metadata.format_version)


def _append(table, data_files: list, summary: dict[str, str]) -> None:
    """One snapshot appending ``data_files``, committed through the table's catalog (the
    ledger's: the pointer swap joins the caller's transaction), as ``Table.append`` does."""
    tables = require("pyiceberg.table", "lake")
    props = require("pyiceberg.utils.properties", "lake")
    merge = props.property_as_bool(table.metadata.properties, tables.TableProperties.MANIFEST_MERGE_ENABLED,
                                   tables.TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT)
    with table.transaction() as tx:
        update = tx.update_snapshot(snapshot_properties=summary)
        with (update.merge_append() if merge else update.fast_append()) as append:
            for data_file in data_files:
                append.append_data_file(data_file)


def sync_in_current_transaction(conn: sqlite3.Connection, target: IcebergTarget, run_id: str | None,
                                now: str | None = None, *, watched: _Watched | None = None) -> SyncResult:
    """Append the topic's rows the table does not hold yet; commit with the caller's transaction.

    ``watched``: the data files a stage's commit wrote from the rows it stored
    (``LakeFinisher``); used when they are exactly the rows above what the table holds, else
    deleted and the rows read back.

    Raises:
        LakeConfigError: the target's definition changed, or does not fit the topic's model.
        ConcurrentRunError: the table was committed by another writer meanwhile.
        LakeError: pyiceberg could not write the table (names the target and the cause).
    """
    now = now or utc_now()
    stored = state.declare_target_in_current_transaction(conn, target.row(), now)
    layout = read_layout(conn, target.topic)
    schema = arrow_schema(layout)
    upto = TopicTable(conn, layout).high_watermark()
    data_files = watched.data_files(stored.last_id, upto) if watched is not None else None
    read_back = data_files is None
    if read_back:
        checkpoint("lake:before-data-files")
    writer = None
    try:
        table = _load_or_create(conn, target, layout)
        if read_back and upto > stored.last_id:
            _check_rows_schema(table, schema)
            writer = DataFileWriter(table, schema)
            for batch in arrow_batches(conn, layout, stored.last_id, upto, schema):
                writer.add(batch)
            rows = writer.rows
            data_files = writer.finish() if rows else []
        else:
            rows = upto - stored.last_id if data_files else 0
        if not rows:
            state.record_sync_in_current_transaction(conn, target.name, max(upto, stored.last_id),
                                                     stored.snapshot_id, stored.run_id, now)
            return SyncResult(target.name, 0, None, max(upto, stored.last_id))
        summary = {"minikafka.topic": target.topic, "minikafka.last-id": str(upto)}
        if run_id:
            summary["minikafka.run-id"] = run_id
        _append(table, data_files, summary)
    except (LakeConfigError, state.ConcurrentRunError):
        raise
    except Exception as exc:  # pyiceberg's and the file system's errors, named once
        if writer is not None:
            writer.discard()
        if type(exc).__module__.startswith(("pyiceberg", "pyarrow")) or isinstance(exc, OSError | ValueError):
            raise LakeError(f"lake target {target.name!r}: {type(exc).__name__}: {exc}") from exc
        raise
    snapshot = table.metadata.current_snapshot()
    snapshot_id = snapshot.snapshot_id if snapshot else None
    files = int((snapshot.summary or {}).get("added-data-files", 0)) if snapshot else 0
    state.record_sync_in_current_transaction(conn, target.name, upto, snapshot_id, run_id, now)
    return SyncResult(target.name, rows, snapshot_id, upto, files, read_back=read_back)


def _sync_of(target) -> Callable:
    """The in-transaction sync of a target's format."""
    if isinstance(target, delta.DeltaTarget):
        return delta.sync_in_current_transaction
    if isinstance(target, parquet.ParquetTarget):
        return parquet.sync_in_current_transaction
    return sync_in_current_transaction


class LakeFinisher:
    """A finisher for ``commit_stage(..., finishers=[...])``: syncs each target (Iceberg, Delta
    or a Parquet export) inside the stage's commit and notes what it wrote in the run's
    details (``lake``). It also watches the rows the commit stores into an Iceberg target's
    topic (``watch_output``) and writes their data files while the insert goes on, so the
    sync does not read them back (see ``_Watched``)."""

    def __init__(self, targets: Iterable[Any]):
        self.targets = list(targets)
        self._watched: dict[str, _Watched] = {}

    def watch_output(self, conn: sqlite3.Connection, layout: TopicLayout) -> Callable | None:
        watching = []
        for target in self.targets:
            if isinstance(target, IcebergTarget) and target.topic == layout.name:
                if target.name in self._watched:  # a second output into the same topic: read back
                    self._watched[target.name].give_up()
                    continue
                watching.append(self._watched.setdefault(target.name, _Watched(conn, target, layout)))
        if not watching:
            return None
        return watching[0] if len(watching) == 1 else lambda batch, first_id: [w(batch, first_id) for w in watching]

    def __call__(self, conn: sqlite3.Connection, run: RunResult) -> None:
        written = {}
        for target in self.targets:
            if isinstance(target, IcebergTarget):
                result = sync_in_current_transaction(conn, target, run.run_id, watched=self._watched.get(target.name))
            else:
                result = _sync_of(target)(conn, target, run.run_id)
            written[target.name] = {"rows": result.rows, "snapshot_id": result.snapshot_id,
                                    "last_id": result.last_id}
            if result.read_back is not None:
                written[target.name]["read_back"] = result.read_back
        if run.details is None:
            run.details = {}
        run.details.setdefault("lake", {}).update(written)

    def release(self) -> None:
        """The commit is over: delete the data files of a watch no sync took (a commit that
        failed before its snapshot was made; the files of a snapshot rolled back are orphans)."""
        for watched in self._watched.values():
            watched.give_up()
        self._watched.clear()


def lake_finisher(targets: Iterable[Any]) -> LakeFinisher:
    """A callback for ``commit_stage(..., finishers=[...])``: sync each target (Iceberg or
    Delta) inside the stage's commit and note what it wrote in the run's details (``lake``)."""
    return LakeFinisher(targets)


def sync(ledger, target: IcebergTarget, *, run: RunResult | None = None) -> SyncResult:
    """Bring ``target`` up to its topic in one transaction of its own, with a run row (kind ``lake``).

    Raises: as ``sync_in_current_transaction``.
    """
    from ..consuming.runlog import new_run_id, write_run_in_current_transaction
    output = f"iceberg:{target.namespace}.{target.name}" if isinstance(target, IcebergTarget) \
        else f"{target.row().format}:{target.location}"
    run = run or RunResult(new_run_id("lake"), "lake", stage=f"lake:{target.name}", inputs=[target.topic],
                           outputs=[output])
    with ledger.atomic() as conn:
        result = _sync_of(target)(conn, target, run.run_id)
        run.rows_in = run.rows_out = result.rows
        run.details = {"lake": {target.name: {"rows": result.rows, "snapshot_id": result.snapshot_id,
                                              "last_id": result.last_id}}}
        write_run_in_current_transaction(conn, run.finish("succeeded"))
    return result


def reader_catalog(ledger_path: str | Path) -> Any:
    """pyiceberg's own ``SqlCatalog`` over the ledger file, for reading (it creates nothing)."""
    sql = require("pyiceberg.catalog.sql", "lake")
    return sql.SqlCatalog(CATALOG, uri=f"sqlite:///{Path(ledger_path).resolve()}", init_catalog_tables="false")


# -- orphans -----------------------------------------------------------------------------------

def _referenced(table) -> set[str]:
    """Every file the table's current metadata reaches: metadata files, manifest lists,
    manifests, data and delete files of every snapshot."""
    keep = {table.metadata_location}
    keep.update(entry.metadata_file for entry in table.metadata.metadata_log)
    for snapshot in table.metadata.snapshots:
        keep.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            keep.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                keep.add(entry.data_file.file_path)
    return {_local(p) for p in keep}


def _local(uri: str) -> str:
    parsed = urlparse(uri)
    return parsed.path if parsed.scheme == "file" else uri


def orphan_files(conn: sqlite3.Connection, name: str) -> list[str]:
    """Files under the table's location that no commit holds (local locations), per format:
    an Iceberg table's that its metadata does not reach, a Delta table's that its log does
    not name (``delta.orphan_files``), a Parquet export's above its committed range
    (``parquet.orphan_files``).

    Call it holding the write lock (``remove_orphans`` does): every commit writes its files
    while holding it, so no live attempt's file is counted.

    Raises:
        LakeError: no such target, or its location is not a local directory.
    """
    target = state.read_target(conn, name)
    if target is None:
        raise LakeError(f"no lake target {name!r} in this ledger")
    if urlparse(target.location).scheme not in ("", "file"):
        raise LakeError(f"lake target {name!r}: orphan cleanup lists local locations only, not {target.location}")
    root = Path(_local(target.location))
    if target.format == "delta":
        return delta.orphan_files(str(root))
    if target.format == "parquet":
        return parquet.orphan_files(str(root), target.last_id)
    if not root.is_dir():
        return []
    if state.read_pointer(conn, CATALOG, target.namespace, target.name) is None:
        keep: set[str] = set()
    else:
        keep = _referenced(_catalog_class()(conn).load_table((target.namespace, target.name)))
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and str(p) not in keep)


def remove_orphans(ledger, name: str, *, dry_run: bool = False) -> list[str]:
    """Delete (``dry_run``: only list) the orphan files of lake target ``name``, under the write
    lock, and leave a run row (kind ``lake-clean``). Returns the files."""
    from ..consuming.runlog import new_run_id, write_run_in_current_transaction

    run = RunResult(new_run_id("lake-clean"), "lake-clean", stage=f"lake:{name}")
    with ledger.atomic() as conn:
        files = orphan_files(conn, name)
        if not dry_run:
            for path in files:
                Path(path).unlink(missing_ok=True)
        run.rows_in = len(files)
        run.details = {"orphans": len(files), "dry_run": dry_run}
        write_run_in_current_transaction(conn, run.finish("succeeded"))
    return files


def targets_of(conn: sqlite3.Connection, topics: Sequence[str] | None = None) -> list[state.TargetRow]:
    """The declared targets (of ``topics`` only, when given)."""
    rows = state.list_targets(conn)
    return rows if topics is None else [r for r in rows if r.topic in topics]


def target_of_row(row: state.TargetRow):
    """The ``IcebergTarget`` or ``DeltaTarget`` a recorded row describes."""
    if row.format == "delta":
        return delta.DeltaTarget(row.name, row.topic, row.location, row.partition_by)
    if row.format == "parquet":
        return parquet.ParquetTarget(row.name, row.topic, row.location, row.partition_by)
    return IcebergTarget(row.name, row.topic, row.location, row.partition_by, row.namespace)


def declare(ledger, targets: Iterable[IcebergTarget]) -> list[state.TargetRow]:
    """Record lake targets in one transaction (a pipeline's ``[lake.*]`` tables; idempotent).

    Each target's schema and partitioning are checked against its topic now, so a stage's
    commit never meets a target that cannot be written.

    Raises:
        TopicNotFoundError: a target's topic does not exist.
        LakeConfigError: a partition column is not a field, or a target's definition changed.
    """
    now = utc_now()
    stored = []
    with ledger.atomic() as conn:
        for target in targets:
            layout = read_layout(conn, target.topic)
            if isinstance(target, delta.DeltaTarget):
                delta.check_partitions(target, layout)
            elif isinstance(target, parquet.ParquetTarget):
                parquet.check_partitions(target, layout)
            else:
                partition_spec(target, iceberg_schema(layout))
            stored.append(state.declare_target_in_current_transaction(conn, target.row(), now))
    return stored


def finishers_for(conn: sqlite3.Connection, topics: Sequence[str]) -> list[Callable[[sqlite3.Connection, RunResult],
                                                                                  None]]:
    """The in-transaction finishers of a stage writing ``topics``: one that syncs every declared
    lake target of those topics (none: an empty list, and neither pyiceberg nor deltalake is imported)."""
    targets = [target_of_row(r) for r in targets_of(conn, topics)]
    if not targets:
        return []
    if any(r.format == "iceberg" for r in targets_of(conn, topics)):
        _catalog_class()  # pyiceberg imported now (a second or two), not while the commit holds the write lock
        require("pyiceberg.io.pyarrow", "lake")
    if any(r.format == "delta" for r in targets_of(conn, topics)):
        require("deltalake", "lake")
    return [lake_finisher(targets)]


# -- maintenance: compaction and snapshot expiry -------------------------------------------------

@dataclass
class MaintenanceResult:
    """What a compaction or an expiry found and did (``dry_run``: only found)."""

    target: str
    dry_run: bool
    files_before: int = 0
    files_after: int = 0
    most_files_in_a_partition: int = 0
    snapshots_expired: int = 0
    done: bool = False


def _files_per_partition(table) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in table.inspect.files().select(["partition"]).to_pylist():
        key = repr(sorted((entry.get("partition") or {}).items()))
        counts[key] = counts.get(key, 0) + 1
    return counts


def _maintenance_run(ledger, kind: str, name: str, work: Callable[[sqlite3.Connection, Any], MaintenanceResult]):
    from ..consuming.runlog import new_run_id, write_run_in_current_transaction

    run = RunResult(new_run_id(kind), kind, stage=f"lake:{name}")
    with ledger.atomic() as conn:
        row = state.read_target(conn, name)
        if row is None or row.format != "iceberg":
            raise LakeError(f"no Iceberg lake target {name!r} in this ledger")
        if state.read_pointer(conn, CATALOG, row.namespace, row.name) is None:
            raise LakeError(f"lake target {name!r} has no table yet (nothing was written to it)")
        table = _catalog_class()(conn).load_table((row.namespace, row.name))
        result = work(conn, table)
        run.details = {k: v for k, v in result.__dict__.items() if k != "target"}
        write_run_in_current_transaction(conn, run.finish("succeeded"))
    return result


def compact(ledger, name: str, *, max_files: int = 2, dry_run: bool = False) -> MaintenanceResult:
    """Rewrite the Iceberg table ``name`` into one file per partition when a partition holds
    more than ``max_files`` data files (one nightly run adds a few per partition), as one new
    snapshot committed like a stage's (the pointer swap inside a ledger transaction, with a run
    row of kind ``lake-compact``). The files it replaces stay referenced by the older snapshots
    until ``expire_snapshots``; then ``remove_orphans`` deletes them.

    Raises:
        LakeError: no such Iceberg target, or it holds no table yet.
    """
    def work(conn, table) -> MaintenanceResult:
        per = _files_per_partition(table)
        result = MaintenanceResult(name, dry_run, sum(per.values()), sum(per.values()), max(per.values(), default=0))
        if result.most_files_in_a_partition <= max_files or dry_run:
            return result
        rows = table.scan().to_arrow()
        table.overwrite(rows, snapshot_properties={"minikafka.operation": "compact"})
        result.files_after = sum(_files_per_partition(table).values())
        result.done = True
        return result

    return _maintenance_run(ledger, "lake-compact", name, work)


def expire_snapshots(ledger, name: str, *, older_than, dry_run: bool = False) -> MaintenanceResult:
    """Drop the snapshots of Iceberg table ``name`` taken before ``older_than`` (a datetime; the
    current snapshot always stays), committed like a stage's, with a run row of kind
    ``lake-expire``. The files only they referenced become orphans for ``remove_orphans``.

    Raises:
        LakeError: no such Iceberg target, or it holds no table yet.
    """
    def work(conn, table) -> MaintenanceResult:
        current = table.metadata.current_snapshot_id
        cutoff = int(older_than.timestamp() * 1000)
        old = [s.snapshot_id for s in table.metadata.snapshots
               if s.timestamp_ms < cutoff and s.snapshot_id != current]
        result = MaintenanceResult(name, dry_run, snapshots_expired=len(old))
        if old and not dry_run:
            table.maintenance.expire_snapshots().by_ids(old).commit()
            result.done = True
        return result

    return _maintenance_run(ledger, "lake-expire", name, work)

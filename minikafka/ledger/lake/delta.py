"""Delta tables mirroring a topic, written with delta-rs and an app transaction per target.

A Delta table has no catalog the ledger could hold, so its commit (the next ``_delta_log``
entry) cannot join the ledger's transaction. Instead each write carries an app transaction
(``app_id`` ``minikafka:<target>``, version the highest topic row id it holds) and
``sync_in_current_transaction`` reads ``transaction_version()`` before writing (delta-rs does
not check it itself): inside the ledger's transaction it

1. reads how far the ledger says the table holds the topic (``last_id``) and how far the
   table's own app transaction says it does;
2. writes the topic's rows above the larger of the two, up to the topic's last row, as
   Parquet data files (``write_data_files``: pyarrow, one file per partition, with the stats
   readers prune with), then commits them as one Delta commit (delta-rs's
   ``create_write_transaction``) whose app transaction version is that last row id;
3. moves ``last_id`` in the caller's transaction.

Fault points: ``lake:before-data-files``, ``lake:after-data-files``, ``lake:after-delta-commit``
(then the ledger's own ``commit:after-commit``). Crash contract: a crash before the Delta
commit leaves both as they were; the data files of the attempt are in no action of the log,
orphans that ``orphan_files`` (``lake clean``) finds and deletes. A crash after
the Delta commit and before the ledger's COMMIT leaves the table ahead of the ledger; the
re-run finds the app transaction's version at or above the rows it would write and skips
them, so the acks commit once and no row is written twice. That holds when the re-run
commits the same rows under the same ids as the attempt that died (a deterministic stage
over the same pending inputs); an Iceberg target has no such condition, its pointer swap is
inside the ledger's transaction.

Types as the Iceberg targets' (``rows.arrow_schema``); partitions are identity columns.
deltalake is imported only here (extra ``lake``).
"""

from __future__ import annotations

import json
import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ...errors import LakeConfigError, LakeError
from ...util.clock import utc_now
from ...util.faults import checkpoint
from ...util.optional import require
from ..topics.catalog import read_layout
from ..topics.layout import TopicLayout
from ..topics.table import TopicTable
from . import state
from .rows import SyncResult, arrow_rows, arrow_schema

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass(frozen=True)
class DeltaTarget:
    """A Delta table that mirrors a topic (written with delta-rs, an app transaction per write).

    Args:
        name: the target's name (letters, digits, ``_``); the app id is ``minikafka:<name>``.
        topic: the topic whose rows it holds.
        location: the table's directory (a local path, made absolute) or an object-store URI.
        partition_by: identity partition columns (fields of the topic's model).
    """

    name: str
    topic: str
    location: str
    partition_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise LakeConfigError(f"lake target {self.name!r}: name must be letters, digits and _")
        if not self.location:
            raise LakeConfigError(f"lake target {self.name!r}: location is empty")
        if not urlparse(self.location).scheme or len(urlparse(self.location).scheme) == 1:
            object.__setattr__(self, "location", str(Path(self.location).expanduser().resolve()))
        parts = (self.partition_by,) if isinstance(self.partition_by, str) else tuple(self.partition_by)
        object.__setattr__(self, "partition_by", parts)
        for column in parts:
            if not isinstance(column, str) or not _NAME.match(column):
                raise LakeConfigError(f"lake target {self.name!r}: a Delta table's partition_by names columns, "
                                      f"not {column!r}")

    @property
    def app_id(self) -> str:
        return f"minikafka:{self.name}"

    def row(self) -> state.TargetRow:
        return state.TargetRow(self.name, "delta", self.topic, self.location, "", self.partition_by)


def check_partitions(target: DeltaTarget, layout: TopicLayout) -> None:
    """Raises LakeConfigError naming a partition column the topic's model lacks."""
    for column in target.partition_by:
        if column not in layout.field_names:
            raise LakeConfigError(f"lake target {target.name!r}: partition column {column!r} is not a field of "
                                  f"topic {target.topic!r}")
        if next(c for c in layout.columns if c.name == column).kind == "bytes":
            raise LakeConfigError(f"lake target {target.name!r}: partition column {column!r} holds bytes, which a "
                                  "Delta partition value (text in the log) does not keep")


def _table(location: str):
    deltalake = require("deltalake", "lake")
    try:
        return deltalake.DeltaTable(location)
    except deltalake.exceptions.TableNotFoundError:
        return None


# -- data files ----------------------------------------------------------------------------

_FILE_ROWS = 1 << 24  # rows per data file at most, as a Parquet export's
_STATS_TEXT = 32  # string stats longer than this are cut (min) or left out (max), as Delta writers do


def _partition_value(value) -> str | None:
    """A partition value as the Delta log serializes it (a string; None for null)."""
    import datetime as dt
    import decimal

    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _stat(value, pa_type, bound: str):
    """One min or max value as Delta's stats JSON holds it; None: leave it out (always safe)."""
    import datetime as dt
    import decimal
    import math

    pa = require("pyarrow", "lake")
    if value is None or pa.types.is_binary(pa_type) or pa.types.is_large_binary(pa_type):
        return None
    if isinstance(value, dt.datetime):  # milliseconds, as Delta's stats: the max rounded up, so pruning stays safe
        value = value.astimezone(dt.UTC)
        if bound == "max" and value.microsecond % 1000:
            value += dt.timedelta(microseconds=1000 - value.microsecond % 1000)
        return value.replace(microsecond=value.microsecond // 1000 * 1000).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str) and len(value) > _STATS_TEXT:
        return value[:_STATS_TEXT] if bound == "min" else None
    return value


def _stats(table) -> str:
    """The ``stats`` JSON of one data file: numRecords, minValues, maxValues, nullCount."""
    pc = require("pyarrow.compute", "lake")
    pa = require("pyarrow", "lake")
    low, high, nulls = {}, {}, {}
    for field, column in zip(table.schema, table.columns):
        if pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type):
            continue
        nulls[field.name] = column.null_count
        if column.null_count == len(column):
            continue
        bounds = pc.min_max(column).as_py()
        for out, bound in ((low, "min"), (high, "max")):
            value = _stat(bounds[bound], field.type, bound)
            if value is not None:
                out[field.name] = value
    return json.dumps({"numRecords": table.num_rows, "minValues": low, "maxValues": high, "nullCount": nulls},
                      separators=(",", ":"))


def write_data_files(location: str, rows, partition_by: tuple[str, ...]) -> list:
    """Write ``rows`` as the Parquet data files of one Delta commit (one per partition, the
    partition columns in the directory names, not the files) and return their ``AddAction``s:
    path (relative, as on disk: delta-rs URL-encodes it in the log), size, partition values and
    the stats readers prune with.
    Nothing names the files until a commit of the actions does."""
    import time
    import uuid
    from urllib.parse import quote

    pa_fs = require("pyarrow.fs", "lake")
    pq = require("pyarrow.parquet", "lake")
    transaction = require("deltalake.transaction", "lake")
    if urlparse(location).scheme and len(urlparse(location).scheme) > 1:
        filesystem, root = pa_fs.FileSystem.from_uri(location)
    else:
        filesystem, root = pa_fs.LocalFileSystem(), Path(location).resolve().as_posix()
    parts = [(rows, {})]
    if partition_by:
        ordered = rows.sort_by([(c, "ascending") for c in partition_by])  # stable: _id order kept in a partition
        groups = ordered.group_by(list(partition_by), use_threads=False).aggregate([("_id", "count")])
        parts, offset = [], 0
        for group in groups.to_pylist():
            count = group["_id_count"]
            values = {c: _partition_value(group[c]) for c in partition_by}
            parts.append((ordered.slice(offset, count).drop_columns(list(partition_by)), values))
            offset += count
    parts = [(table.slice(first, _FILE_ROWS), values) for table, values in parts  # a file per 16M rows at most
             for first in range(0, table.num_rows, _FILE_ROWS)]
    now = int(time.time() * 1000)

    def write(part) -> Any:
        table, values = part
        directory = "/".join(f"{c}={'__HIVE_DEFAULT_PARTITION__' if v is None else quote(v, safe='')}"
                             for c, v in values.items())
        relative = (directory + "/" if directory else "") + f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        path = f"{root.rstrip('/')}/{relative}"
        filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
        pq.write_table(table, path, filesystem=filesystem, compression="snappy", row_group_size=1 << 20,
                       dictionary_pagesize_limit=1 << 16)  # a column of mostly distinct values falls back to
        # plain encoding early: building its whole dictionary first made a 1M-row write 1.5x slower
        return transaction.AddAction(relative, filesystem.get_file_info(path).size,  # delta-rs URL-encodes it
                                     values, now, True, _stats(table))

    if len(parts) == 1:
        return [write(parts[0])]
    with ThreadPoolExecutor(max_workers=min(4, len(parts))) as pool:  # pyarrow writes without the GIL
        return list(pool.map(write, parts))


def sync_in_current_transaction(conn: sqlite3.Connection, target: DeltaTarget, run_id: str | None,
                                now: str | None = None):
    """Append the topic's rows the table does not hold yet (checked by its app transaction).

    Returns a ``rows.SyncResult`` (``snapshot_id``: the Delta table's version).

    Raises:
        LakeConfigError: the target's definition changed or a partition column is not a field.
        LakeError: delta-rs could not write the table (names the target and the cause).
    """
    deltalake = require("deltalake", "lake")
    now = now or utc_now()
    stored = state.declare_target_in_current_transaction(conn, target.row(), now)
    layout = read_layout(conn, target.topic)
    check_partitions(target, layout)
    upto = TopicTable(conn, layout).high_watermark()
    checkpoint("lake:before-data-files")
    try:
        table = _table(target.location)
        held = (table.transaction_version(target.app_id) if table is not None else None) or 0
        start = max(stored.last_id, held)
        if upto <= start:  # nothing new, or written by an attempt whose ledger commit died
            version = table.version() if table is not None else None
            state.record_sync_in_current_transaction(conn, target.name, max(upto, start), version, run_id, now)
            return SyncResult(target.name, 0, version, max(upto, start))
        rows = arrow_rows(conn, layout, start, upto, arrow_schema(layout))
        actions = write_data_files(target.location, rows, target.partition_by)
        checkpoint("lake:after-data-files")
        commit = deltalake.CommitProperties(
            app_transactions=[deltalake.Transaction(target.app_id, upto)],
            custom_metadata={"minikafka.topic": target.topic, "minikafka.run-id": run_id or ""})
        if table is None:
            require("deltalake.transaction", "lake").create_table_with_add_actions(
                target.location, deltalake.Schema.from_arrow(rows.schema), actions, mode="error",
                partition_by=list(target.partition_by) or None, commit_properties=commit)
        else:
            table.create_write_transaction(actions, "append", rows.schema,
                                           partition_by=list(target.partition_by) or None, commit_properties=commit)
        checkpoint("lake:after-delta-commit")
        version = deltalake.DeltaTable(target.location).version()
    except LakeConfigError:
        raise
    except Exception as exc:  # delta-rs's and the file system's errors, named once
        if type(exc).__module__.startswith(("deltalake", "pyarrow")) or isinstance(exc, OSError | ValueError):
            raise LakeError(f"lake target {target.name!r}: {type(exc).__name__}: {exc}") from exc
        raise
    state.record_sync_in_current_transaction(conn, target.name, upto, version, run_id, now)
    return SyncResult(target.name, rows.num_rows, version, upto)


# -- orphans ---------------------------------------------------------------------------------

_FILE_ACTIONS = ("add", "remove", "cdc")


def _logged_paths(log: Path) -> set[str]:
    """Every file path an ``add``, ``remove`` or ``cdc`` action of the log names: in its JSON
    commits (and JSON checkpoints) and its checkpoint parquet files (and their sidecars)."""
    pq = require("pyarrow.parquet", "lake")
    paths: set[str] = set()
    for commit in log.rglob("*.json"):
        with commit.open(encoding="utf-8") as lines:
            for line in lines:
                action = json.loads(line) if line.strip() else {}
                for kind in _FILE_ACTIONS:
                    if isinstance(action.get(kind), dict) and action[kind].get("path"):
                        paths.add(action[kind]["path"])
    for checkpoint_file in log.rglob("*.parquet"):
        parquet_file = pq.ParquetFile(checkpoint_file)
        names = set(parquet_file.schema_arrow.names)
        for kind in (k for k in _FILE_ACTIONS if k in names):
            column = parquet_file.read(columns=[f"{kind}.path"]).column(kind)  # not the stats beside it
            paths.update(v["path"] for v in column.to_pylist() if v and v.get("path"))
    return paths


def _relative(root: Path, logged: str) -> str:
    """A log path as a path under the table's root: relative paths are URL-encoded, absolute
    ones are URIs (``file:///...``)."""
    parsed = urlparse(logged)
    if parsed.scheme and len(parsed.scheme) > 1:
        path = Path(unquote(parsed.path))
        return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    return unquote(logged)


def orphan_files(location: str) -> list[str]:
    """The Parquet data files under a Delta table's (local) location that no action of its log
    names: files of attempts that never committed. A file committed and later removed is still
    named by its ``remove`` action: time travel's, for ``DeltaTable.vacuum``, not an orphan.
    Files under ``_delta_log/`` and other hidden (``_``/``.``) directories are never listed.

    Call it holding the ledger's write lock: a sync writes its files and commits them holding it.
    """
    root = Path(location)
    if not root.is_dir():
        return []
    log = root / "_delta_log"
    keep = set()
    if log.is_dir():
        keep = {_relative(root, p) for p in _logged_paths(log)}
    orphans = []
    for path in root.rglob("*.parquet"):
        relative = path.relative_to(root)
        if any(part.startswith(("_", ".")) and "=" not in part for part in relative.parts[:-1]):
            continue  # _delta_log, _change_data, .tmp directories: not data files of the table
        if relative.as_posix() not in keep and path.is_file():
            orphans.append(str(path))
    return sorted(orphans)

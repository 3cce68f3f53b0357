"""Incremental, partitioned Parquet exports of a topic: only the rows new since the last one.

A Parquet target (``ParquetTarget``) writes a directory of hive-partitioned Parquet files
(``col=value/...``). ``sync_in_current_transaction`` runs inside a ledger write transaction
(a stage's commit, or ``lake sync`` on its own) and writes the topic's rows above what the
target holds (``last_id``) up to the topic's last row, in files named by that id range
(``part-<first id>-<last id>-<n>.parquet``), then moves ``last_id`` in the caller's
transaction: a re-run exports nothing twice.

Crash contract: the files are written before the ledger's COMMIT. A file whose first id is
above the committed ``last_id`` belongs to an attempt that did not commit; the next sync
deletes every such file before it writes, so the directory ends with each row once. A
reader listing the directory while an export runs can see the files of the attempt in
progress: a plain directory of Parquet files has no snapshot (use an Iceberg or Delta target
where readers need one).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

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
_FILE = re.compile(r"^part-(\d{12})-(\d{12})-\d+\.parquet$")


@dataclass(frozen=True)
class ParquetTarget:
    """A directory of Parquet files holding a topic's rows, exported incrementally.

    Args:
        name: the target's name (letters, digits, ``_``).
        topic: the topic whose rows it holds.
        location: a local directory (made absolute).
        partition_by: identity partition columns (hive style, ``col=value`` directories).
    """

    name: str
    topic: str
    location: str
    partition_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise LakeConfigError(f"lake target {self.name!r}: name must be letters, digits and _")
        if not self.location or urlparse(self.location).scheme not in ("", "file") and \
                len(urlparse(self.location).scheme) != 1:
            raise LakeConfigError(f"lake target {self.name!r}: a Parquet export needs a local directory, "
                                  f"not {self.location!r}")
        object.__setattr__(self, "location", str(Path(self.location).expanduser().resolve()))
        parts = (self.partition_by,) if isinstance(self.partition_by, str) else tuple(self.partition_by)
        object.__setattr__(self, "partition_by", parts)
        for column in parts:
            if not isinstance(column, str) or not _NAME.match(column):
                raise LakeConfigError(f"lake target {self.name!r}: a Parquet export's partition_by names columns, "
                                      f"not {column!r}")

    def row(self) -> state.TargetRow:
        return state.TargetRow(self.name, "parquet", self.topic, self.location, "", self.partition_by)


def check_partitions(target: ParquetTarget, layout: TopicLayout) -> None:
    """Raises LakeConfigError naming a partition column the topic's model lacks."""
    for column in target.partition_by:
        if column not in layout.field_names:
            raise LakeConfigError(f"lake target {target.name!r}: partition column {column!r} is not a field of "
                                  f"topic {target.topic!r}")


def uncommitted_files(location: str, last_id: int) -> list[Path]:
    """The export's files whose first row id is above ``last_id``: an attempt that did not commit."""
    root = Path(location)
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("part-*.parquet") if (m := _FILE.match(p.name)) and int(m.group(1)) > last_id)


def orphan_files(location: str, last_id: int) -> list[str]:
    """The export's files no committed sync wrote (``uncommitted_files``), as strings; the files
    of committed ranges and any other file under the directory are never listed."""
    return [str(p) for p in uncommitted_files(location, last_id)]


def sync_in_current_transaction(conn: sqlite3.Connection, target: ParquetTarget, run_id: str | None,
                                now: str | None = None) -> SyncResult:
    """Export the topic's rows above what the target holds; record it with the caller's transaction.

    Raises:
        LakeConfigError: the target's definition changed or a partition column is not a field.
        LakeError: the files could not be written (names the target and the cause).
    """
    ds = require("pyarrow.dataset", "lake")
    now = now or utc_now()
    stored = state.declare_target_in_current_transaction(conn, target.row(), now)
    layout = read_layout(conn, target.topic)
    check_partitions(target, layout)
    upto = TopicTable(conn, layout).high_watermark()
    checkpoint("lake:before-data-files")
    try:
        for stale in uncommitted_files(target.location, stored.last_id):
            stale.unlink(missing_ok=True)
        if upto <= stored.last_id:
            return SyncResult(target.name, 0, None, stored.last_id)
        rows = arrow_rows(conn, layout, stored.last_id, upto, arrow_schema(layout))
        partitioning = ds.partitioning(rows.select(list(target.partition_by)).schema, flavor="hive") \
            if target.partition_by else None
        written: list[str] = []
        ds.write_dataset(rows, target.location, format="parquet", partitioning=partitioning,
                         basename_template=f"part-{stored.last_id + 1:012d}-{upto:012d}-{{i}}.parquet",
                         existing_data_behavior="overwrite_or_ignore", max_rows_per_file=1 << 24,
                         max_rows_per_group=1 << 20,
                         file_visitor=lambda f: written.append(f.path))
        checkpoint("lake:after-data-files")
    except LakeConfigError:
        raise
    except Exception as exc:
        if type(exc).__module__.startswith("pyarrow") or isinstance(exc, OSError | ValueError):
            raise LakeError(f"lake target {target.name!r}: {type(exc).__name__}: {exc}") from exc
        raise
    state.record_sync_in_current_transaction(conn, target.name, upto, None, run_id, now)
    return SyncResult(target.name, rows.num_rows, None, upto, len(written))

"""Lake tables: outputs that leave the file, committed with it (Iceberg, extra ``lake``).

The Iceberg catalog's tables and each lake target's progress (``state``: the only SQL of the
room) and the tables themselves, written inside the ledger's transaction (``iceberg``: the
pointer swap joins the stage's commit; orphan files of rolled-back attempts, found and
removed under the write lock; ``datafiles``: an Iceberg append's Parquet files, written in
a worker thread beside the commit's insert; ``delta``: Delta tables, data files then a
commit carrying an app transaction checked before each write, and the data files no log
action names; ``parquet``: incremental, partitioned Parquet exports and the files above
their committed range; ``rows``: the rows all three copy).

The top room: it imports the rooms below it; none imports it. pyiceberg is imported on use.
"""

from . import state
from .delta import DeltaTarget
from .iceberg import (
    CATALOG,
    IcebergTarget,
    MaintenanceResult,
    SyncResult,
    compact,
    declare,
    expire_snapshots,
    finishers_for,
    iceberg_schema,
    lake_finisher,
    orphan_files,
    reader_catalog,
    remove_orphans,
    sync,
    sync_in_current_transaction,
    target_of_row,
    targets_of,
)
from .parquet import ParquetTarget
from .state import TargetRow, list_targets, read_target

__all__ = [
    "CATALOG",
    "compact",
    "declare",
    "DeltaTarget",
    "expire_snapshots",
    "finishers_for",
    "iceberg_schema",
    "IcebergTarget",
    "lake_finisher",
    "list_targets",
    "MaintenanceResult",
    "orphan_files",
    "ParquetTarget",
    "read_target",
    "reader_catalog",
    "remove_orphans",
    "state",
    "sync",
    "sync_in_current_transaction",
    "SyncResult",
    "target_of_row",
    "TargetRow",
    "targets_of",
]

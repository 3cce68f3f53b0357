"""File care: copies of the ledger file, putting one back, and the runs that record both.

Backups and restores as runs in the run log (``backups``), online snapshots of the file
(``snapshots``) and putting one back in place (``restoring``), copying and hashing files
(``filecopy``), reading a copied write-ahead log (``walfold``), a Litestream configuration
(``litestream``), and the run row of a maintenance run written next to busy writers
(``maintenance_runs``).

The top room: it imports the rooms below it (a maintenance run's row goes through a
connection), none imports it.
"""

from . import snapshots
from .backups import backup, restore
from .litestream import litestream_config
from .maintenance_runs import record_run
from .snapshots import snapshot_figures

__all__ = [
    "backup",
    "litestream_config",
    "record_run",
    "restore",
    "snapshot_figures",
    "snapshots",
]

"""Transactions and wake-ups: the open ledger file, its commits, and who learns of them.

Opening the file (``connection``: settings, transactions) with its format (``schema``, the
ledger's own tables; ``upgrade``, files of an older format) and what it sits on
(``filecheck``); the two commits of stages and backfills (``commit``); single-row writes of
many threads in one durable commit (``group_commit``); events after a commit (``events``);
wake-ups on commits from any process (``watcher``); one short read transaction for a page or
a report (``read_transaction``).

Imports the topics and consumption rooms below it, never the file-care room above.
"""

from . import filecheck
from .commit import (
    ConcurrentRunError,
    InputState,
    LoadSlice,
    StagedOutput,
    commit_slices,
    commit_stage,
    failed_rows_since,
)
from .connection import Ledger, connect_read_only
from .events import Event, Observer
from .group_commit import flush
from .identity import read_identity
from .read_transaction import read_snapshot
from .schema import LEDGER_FORMAT
from .watcher import Pause, Watcher, drive, drive_async, pause, pause_async, until

__all__ = [
    "commit_slices",
    "commit_stage",
    "ConcurrentRunError",
    "connect_read_only",
    "drive",
    "drive_async",
    "Event",
    "failed_rows_since",
    "filecheck",
    "flush",
    "InputState",
    "Ledger",
    "LEDGER_FORMAT",
    "LoadSlice",
    "Observer",
    "Pause",
    "pause",
    "pause_async",
    "read_identity",
    "read_snapshot",
    "StagedOutput",
    "until",
    "Watcher",
]

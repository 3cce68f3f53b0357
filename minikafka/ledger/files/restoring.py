"""Putting a snapshot back in place of the ledger file, only while nothing else has it open.

``restore_file(ledger, snapshot)``:

1. checks the snapshot (its checksum file, and ``PRAGMA integrity_check`` whichever check
   the backup ran: each index against its table too) and copies it
   beside the ledger under a hidden temporary name, fsynced;
2. takes every run lock beside the ledger (``.minikafka-locks/``: a stage or a backfill
   holds its lock for its whole run, also while Spark computes without a connection open),
   then the ledger itself exclusively (``locking_mode=EXCLUSIVE`` and a write lock, no
   waiting): a held lock or any other connection (a run, an appender, a worker,
   Litestream) makes this fail with ``LedgerInUseError`` and nothing is changed;
3. holding it, copies the write-ahead log into the file (``wal_checkpoint(TRUNCATE)``: no
   other reader exists at this point) and leaves WAL mode, so the old file is whole;
4. links the old file to ``<ledger>.replaced-<UTC time>`` and renames the copy over the
   ledger (the ledger's name never points at nothing, and never at a half-written file).

A crash before step 4 leaves the ledger as it was (and a temporary copy that the next
restore removes); a crash after it leaves the restored ledger and the old file aside.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ...errors import BackupError, LedgerInUseError, LockBusy
from ...util.filelock import exclusive_lock
from . import snapshots
from .filecopy import fsync_path

RESTORING = ".restoring-"
LOCK_DIR = ".minikafka-locks"  # where stages and backfills hold their run locks (beside the ledger)


@dataclass(frozen=True)
class FileRestored:
    """What ``restore_file`` did: the snapshot put in place and where the old file went (None
    when there was no ledger file yet)."""

    ledger: Path
    snapshot: snapshots.Snapshot
    replaced: Path | None


def _aside_name(ledger: Path, when: datetime) -> Path:
    stamp = when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    return ledger.with_name(f"{ledger.name}.replaced-{stamp}")


def check_snapshot(path: Path) -> snapshots.Snapshot:
    """The snapshot at ``path`` after checking its checksum and integrity.

    Raises:
        SnapshotNotFoundError / BackupError: not a snapshot file, a checksum mismatch, a failed check.
    """
    from ...errors import SnapshotNotFoundError

    if not path.is_file():
        raise SnapshotNotFoundError(f"no snapshot at {path}")
    snap = snapshots.parse_snapshot(path)
    if snap is None:
        raise BackupError(f"{path} is not named like a snapshot (<ledger>-backup-<time>-<run>.sqlite); "
                          "take snapshots with 'minikafka backup'")
    snapshots.verify_checksum(path)
    problems = snapshots.integrity_problems(path)
    if problems:
        raise BackupError(f"{path} failed PRAGMA integrity_check: {'; '.join(problems[:3])}")
    return snap


def _hold_exclusively(ledger: Path) -> sqlite3.Connection:
    """A connection holding the ledger's exclusive lock, the log copied in and WAL mode left.

    Raises:
        LedgerInUseError: another connection has the ledger open.
    """
    conn = sqlite3.connect(str(ledger), isolation_level=None, timeout=0)
    try:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("BEGIN EXCLUSIVE")  # keep the lock on this (old) file until it is set aside
    except sqlite3.OperationalError as exc:
        conn.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise LedgerInUseError(
                f"{ledger} is open in another process (a run, an appender, a worker, a console or "
                "Litestream); stop it and try again. Nothing was changed.") from None
        raise BackupError(f"cannot take {ledger} for the restore: {exc}") from exc
    return conn


def restore_file(ledger: str | Path, snapshot: str | Path) -> FileRestored:
    """Replace the ledger file by ``snapshot``, keeping the replaced file aside.

    Raises:
        LedgerInUseError: the ledger is open elsewhere (nothing changed).
        BackupError: the snapshot is damaged or not a snapshot (nothing changed).
    """
    ledger = Path(ledger).expanduser().resolve()
    snap = check_snapshot(Path(snapshot).expanduser().resolve())
    for old in ledger.parent.glob(f".{ledger.name}{RESTORING}*"):
        old.unlink(missing_ok=True)
    staged = ledger.with_name(f".{ledger.name}{RESTORING}{os.getpid()}")
    try:
        shutil.copyfile(snap.path, staged)
        fsync_path(staged)
        with ExitStack() as held:
            _hold_run_locks(ledger, held)
            replaced = _swap(ledger, staged)
    finally:
        staged.unlink(missing_ok=True)
    return FileRestored(ledger, snap, replaced)


def _hold_run_locks(ledger: Path, held: ExitStack) -> None:
    """Take every run lock beside the ledger (a stage or a backfill holds its lock for its whole
    run, also while Spark computes and no connection is open).

    Raises:
        LedgerInUseError: a run holds one (its holder is named).
    """
    locks = ledger.parent / LOCK_DIR
    for path in sorted(locks.glob("*.lock")) if locks.is_dir() else ():
        try:
            held.enter_context(exclusive_lock(path, wait=0, note="restore"))
        except LockBusy as exc:
            raise LedgerInUseError(
                f"{ledger}: a run holds {path.name} ({exc.holder or 'another process'}); wait for it to end "
                "and try again. Nothing was changed.") from None


def _swap(ledger: Path, staged: Path) -> Path | None:
    """Put ``staged`` in place of ``ledger``; the old file's new name (None when there was none)."""
    if not ledger.exists():
        os.replace(staged, ledger)
        fsync_path(ledger.parent)
        return None
    conn = _hold_exclusively(ledger)
    try:
        replaced = _aside_name(ledger, datetime.now(timezone.utc))
        os.link(ledger, replaced)
        for suffix in ("-wal", "-shm"):
            Path(f"{ledger}{suffix}").unlink(missing_ok=True)
        os.replace(staged, ledger)
        fsync_path(ledger.parent)
    finally:
        conn.close()
    return replaced

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

Identity (``identity``): a snapshot of another ledger than the one it would replace is
refused (``ForeignSnapshotError``) unless ``from_other_ledger``; then the restored file
keeps the replaced ledger's identity (its id is written into the temporary copy before
step 4), so its later backups stay its own. A ledger restored where none was (a fresh
machine) takes the snapshot's identity: it is the same ledger. The ledger's directory is
created when missing (and removed again if the restore fails); a full or read-only disk
is a ``BackupError`` saying so, and nothing is changed.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ...errors import BackupError, ForeignSnapshotError, LedgerInUseError, LockBusy, SnapshotNotFoundError
from ...util.dirs import make_missing_dirs, remove_made_dirs
from ...util.filelock import exclusive_lock
from ..transactions import filecheck, identity
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
    """The snapshot at ``path`` after checking its checksum and integrity, with the identity
    found inside the copy.

    Raises:
        SnapshotNotFoundError / BackupError: not a snapshot file, a checksum mismatch, a
            file that is not a ledger (an empty file has a checksum too), a failed check, or a
            manifest that names another identity than the copy holds.
    """
    if not path.is_file():
        raise SnapshotNotFoundError(f"no snapshot at {path}")
    snap = snapshots.parse_snapshot(path)
    if snap is None:
        raise BackupError(f"{path} is not named like a snapshot (<ledger>-backup-<time>-<run>.sqlite); "
                          "take snapshots with 'minikafka backup'")
    snapshots.verify_checksum(path)
    problem = filecheck.ledger_file_problem(path)
    if problem:  # a matching checksum only says the file was not changed since it was written
        raise BackupError(f"{problem}; nothing was changed")
    problems = snapshots.integrity_problems(path)
    if problems:
        raise BackupError(f"{path} failed PRAGMA integrity_check: {'; '.join(problems[:3])}")
    inside = filecheck.ledger_facts(path)[1]
    if snap.ledger_id is not None and snap.ledger_id != inside:
        raise BackupError(f"{path} holds ledger {inside or '(no identity)'} but its manifest "
                          f"{snap.checksum_path.name} says {snap.ledger_id}; nothing was changed")
    return snapshots.Snapshot(snap.path, snap.taken_at, snap.last_run, inside, snap.ledger)


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


def restore_file(ledger: str | Path, snapshot: str | Path, *, from_other_ledger: bool = False) -> FileRestored:
    """Replace the ledger file by ``snapshot``, keeping the replaced file aside.

    Raises:
        LedgerInUseError: the ledger is open elsewhere (nothing changed).
        ForeignSnapshotError: the snapshot is of another ledger and not ``from_other_ledger``
            (nothing changed).
        BackupError: the snapshot is damaged or not a snapshot, or the disk is full or
            read-only (nothing changed).
    """
    ledger = Path(ledger).expanduser().resolve()
    snap = check_snapshot(Path(snapshot).expanduser().resolve())
    target = identity.identity_of_file(ledger) if ledger.exists() else None
    if target is not None and snap.ledger_id is not None and snap.ledger_id != target and not from_other_ledger:
        raise ForeignSnapshotError(
            f"{snap.path.name} is a snapshot of another ledger ({snap.ledger_id}"
            + (f", was {snap.ledger}" if snap.ledger else "") + f") than {ledger} ({target}): restoring it would put "
            "that ledger's data here. Pass --from-other-ledger (from_other_ledger=True) to do so anyway (the "
            "ledger keeps its own identity). Nothing was changed.")
    made = _make_directory(ledger.parent)
    staged = ledger.with_name(f".{ledger.name}{RESTORING}{os.getpid()}")
    try:
        for old in ledger.parent.glob(f".{ledger.name}{RESTORING}*"):
            _remove(old)
        try:
            shutil.copyfile(snap.path, staged)
            if target is not None and snap.ledger_id != target:
                identity.set_identity_of_file(staged, target)
            fsync_path(staged)
        except (OSError, sqlite3.Error) as exc:
            raise BackupError(f"cannot write the restored copy beside {ledger}: {_reason(exc)}; "
                              "nothing was changed") from None
        with ExitStack() as held:
            _hold_run_locks(ledger, held)
            replaced = _swap(ledger, staged)
    except BaseException:
        _remove(staged)
        _remove(Path(f"{staged}-journal"))
        remove_made_dirs(made)
        raise
    return FileRestored(ledger, snap, replaced)


def _remove(path: Path) -> None:
    """Remove a file of ours if it is there (a read-only disk never had it written)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} (errno {exc.errno})"
    return str(exc)


def _make_directory(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; the ones created, outermost first.

    Raises:
        BackupError: it cannot be created (a read-only or full disk, a file in the way).
    """
    try:
        made = make_missing_dirs(directory)
    except OSError as exc:
        raise BackupError(f"cannot create the directory {directory} for the restored ledger: {_reason(exc)}; "
                          "nothing was changed") from None
    if not directory.is_dir():
        raise BackupError(f"cannot restore into {directory}: it is not a directory; nothing was changed")
    return made


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
        try:
            os.link(ledger, replaced)
        except OSError as exc:
            raise BackupError(f"cannot keep the replaced file aside as {replaced.name}: {_reason(exc)}; "
                              "nothing was changed") from None
        for suffix in ("-wal", "-shm"):
            Path(f"{ledger}{suffix}").unlink(missing_ok=True)
        os.replace(staged, ledger)
        fsync_path(ledger.parent)
    finally:
        conn.close()
    return replaced

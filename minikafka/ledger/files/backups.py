"""Backup and restore of a ledger as runs: each leaves a row in the run log.

- ``backup(ledger, dest, keep=N)``: an online snapshot (``snapshots.take_snapshot``), then a
  run row (kind ``backup``) in the live ledger naming the snapshot, its checksum and what
  retention removed. A failed backup leaves a 'failed' row with the reason. The snapshot,
  not its run row, decides the outcome: a row that cannot be written (a ledger on a network
  file system, which minikafka does not write) is a warning in the result.
- ``restore(ledger, snapshot | dest, before_run=RUN_ID)``: the snapshot put in place
  (``restore.restore_file``), then a run row (kind ``restore``) in the restored ledger
  saying which snapshot it came from and where the replaced file went.

The snapshot files' mechanics are in ``snapshots`` and ``restore``; this module is what
the CLI calls.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ...errors import BackupError, LedgerNotFoundError, MinikafkaError, SnapshotNotFoundError
from ...util.clock import parse_timestamp
from ...util.results import Result
from ..consuming.runlog import RunResult, new_run_id, run_started_at
from ..transactions import filecheck, identity
from . import restoring, snapshots
from .maintenance_runs import record_run


@dataclass
class BackupResult(Result):
    """What one backup did."""

    run_id: str
    snapshot: str
    taken_at: str
    last_run: str | None
    sha256: str
    size_bytes: int
    removed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    checked: bool = True
    check: str | None = "quick_check"  # the PRAGMA that checked the copy: quick_check, integrity_check or None
    folded: bool = False  # commits still in the ledger's write-ahead log were folded into the copy
    ledger_id: str | None = None  # the identity of the ledger, carried by the snapshot
    warnings: list[str] = field(default_factory=list)  # what went wrong without undoing the backup

    def summary(self) -> str:
        gone = f"; removed {len(self.removed)} older snapshot(s)" if self.removed else ""
        mb = self.size_bytes / 1e6
        verdict = f"{self.check} ok" if self.checked and self.check else "integrity not checked"
        return (f"backup {self.snapshot}: {mb:.1f} MB in {self.seconds:.2f} s, {verdict}, sha256 "
                f"{self.sha256[:12]}..., last run {self.last_run or 'none'}{gone} ({self.run_id})")


@dataclass
class RestoreResult(Result):
    """What one restore did."""

    run_id: str
    ledger: str
    snapshot: str
    taken_at: str
    last_run: str | None
    replaced: str | None

    def summary(self) -> str:
        aside = f"; the replaced file is kept at {self.replaced}" if self.replaced else ""
        return (f"restored {self.ledger} from {self.snapshot} (taken {self.taken_at}, last run "
                f"{self.last_run or 'none'}){aside} ({self.run_id})")


def backup(ledger: str | Path, dest: str | Path, *, keep: int | None = None, check: bool = True,
           full_check: bool = False, clock: Callable[[], datetime] | None = None,
           progress: Callable[[str], None] | None = None) -> BackupResult:
    """Snapshot the live ledger into ``dest`` and log the run in the ledger.

    ``progress(text)`` hears how the copy goes (see ``snapshots.take_snapshot``). The copy is
    checked with ``PRAGMA quick_check``, or with ``full_check`` ``PRAGMA integrity_check``
    (each index compared with its table too; ``restore`` always runs that one).

    Raises:
        LedgerNotFoundError: no ledger at ``ledger``.
        BackupError: the copy could not be taken or checked (the run row says why).
    """
    _check_path(dest, "the backup directory")
    _check_path(ledger, "the ledger")
    path = Path(ledger).expanduser()
    if not path.is_file():
        raise LedgerNotFoundError(f"no ledger at {ledger}", path=str(ledger))
    problem = filecheck.ledger_file_problem(path)
    if problem:
        raise BackupError(f"{problem}; nothing was backed up")
    identity.ensure_identity_of_file(path)  # a ledger from before identities: its snapshots carry one from now
    run = RunResult(new_run_id("backup"), "backup", stage="backup", outputs=[str(dest)])
    try:
        made = snapshots.take_snapshot(path, dest, keep=keep, check=check, full_check=full_check,
                                        clock=clock, progress=progress)
    except BaseException as exc:
        run.finish("interrupted" if isinstance(exc, KeyboardInterrupt) else "failed",
                   f"{type(exc).__name__}: {exc}")
        try:
            record_run(path, run)
        except Exception:  # noqa: BLE001 (the backup's own error is the one to report)
            pass
        raise
    run.details = {"snapshot": made.snapshot.path.name, "dest": str(made.snapshot.path.parent),
                   "sha256": made.sha256, "size_bytes": made.size, "last_run": made.snapshot.last_run,
                   "removed": [p.name for p in made.removed], "check": made.check,
                   "ledger_id": made.snapshot.ledger_id}
    run.finish("succeeded")
    warnings = []
    try:  # the snapshot is complete and checked: a run row that cannot be written does not undo it
        record_run(path, run)
    except (MinikafkaError, sqlite3.Error, OSError) as exc:
        warnings.append(f"the snapshot is complete, but its run could not be recorded in {ledger}: {exc}")
    return BackupResult(run.run_id, str(made.snapshot.path), snapshots.format_stamp(made.snapshot.taken_at),
                        made.snapshot.last_run, made.sha256, made.size, [str(p) for p in made.removed],
                        round(made.seconds, 3), check, made.check, made.folded, made.snapshot.ledger_id,
                        warnings)


def _check_path(value: str | Path, what: str) -> None:
    """Raise BackupError for an empty path (which would mean the current directory)."""
    if not str(value).strip():
        raise BackupError(f"{what} is an empty path; name it (a '.' for the current directory)")


def snapshot_before_run(ledger: str | Path, dest: str | Path, run_id: str) -> snapshots.Snapshot:
    """The newest snapshot of ``ledger`` in ``dest`` taken before run ``run_id`` started.

    Raises:
        SnapshotNotFoundError: the run is not in the ledger's run log, or no snapshot is older.
    """
    path = Path(ledger).expanduser()
    if not path.is_file():
        raise LedgerNotFoundError(f"no ledger at {ledger}", path=str(ledger))
    conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    try:
        started = run_started_at(conn, run_id)
    finally:
        conn.close()
    if started is None:
        raise SnapshotNotFoundError(f"run {run_id!r} is not in the run log of {ledger}")
    return snapshots.find_snapshot(Path(dest).expanduser(), path.resolve(), before=parse_timestamp(started))


def restore(ledger: str | Path, snapshot: str | Path, *, before_run: str | None = None,
            from_other_ledger: bool = False) -> RestoreResult:
    """Put a snapshot in place of the ledger and log the restore in the restored ledger.

    Args:
        snapshot: a snapshot file, or a directory of snapshots (the newest of this ledger's,
            by its identity, or with ``before_run`` the newest taken before that run started;
            a ledger that does not exist yet takes the snapshots of the one ledger there).
        before_run: a run id of the ledger's run log.
        from_other_ledger: restore a snapshot file of another ledger (another identity); the
            ledger keeps its own identity.

    Raises:
        LedgerInUseError: another process has the ledger open (nothing changed).
        ForeignSnapshotError: the snapshot file is of another ledger (nothing changed).
        SnapshotNotFoundError / BackupError: no fitting snapshot, or a damaged one, or a full or
            read-only disk (nothing changed).
    """
    _check_path(snapshot, "the snapshot (a file or a backup directory)")
    _check_path(ledger, "the ledger")
    ledger_path = Path(ledger).expanduser().resolve()
    chosen = Path(snapshot).expanduser()
    if chosen.is_dir() and from_other_ledger:
        raise BackupError("--from-other-ledger restores a snapshot file you name: pass the file, not the "
                          f"directory {chosen}")
    if before_run and not chosen.is_dir():
        raise BackupError("--before-run picks a snapshot from a directory: pass the backup directory, "
                          f"not the file {chosen}")
    run = RunResult(new_run_id("restore"), "restore", stage="restore", inputs=[str(chosen)])
    try:
        if chosen.is_dir():
            chosen = (snapshot_before_run(ledger_path, chosen, before_run) if before_run
                      else snapshots.find_snapshot(chosen, ledger_path)).path
            run.inputs = [str(chosen)]
        done = restoring.restore_file(ledger_path, chosen, from_other_ledger=from_other_ledger)
    except MinikafkaError as exc:  # refused: the ledger is as it was, and says that a restore was refused
        if ledger_path.is_file():
            run.finish("failed", f"{type(exc).__name__}: {exc}")
            try:
                record_run(ledger_path, run, patience=5.0)
            except MinikafkaError:
                pass
        raise
    run.details = {"snapshot": str(done.snapshot.path), "taken_at": snapshots.format_stamp(done.snapshot.taken_at),
                   "last_run": done.snapshot.last_run, "replaced": str(done.replaced) if done.replaced else None,
                   "snapshot_ledger_id": done.snapshot.ledger_id}
    run.finish("succeeded")
    record_run(ledger_path, run)
    return RestoreResult(run.run_id, str(ledger_path), str(done.snapshot.path),
                         snapshots.format_stamp(done.snapshot.taken_at), done.snapshot.last_run,
                         str(done.replaced) if done.replaced else None)

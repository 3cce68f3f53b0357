"""Backup and restore of a ledger as runs: each leaves a row in the run log.

- ``backup(ledger, dest, keep=N)``: an online snapshot (``snapshots.take_snapshot``), then a
  run row (kind ``backup``) in the live ledger naming the snapshot, its checksum and what
  retention removed. A failed backup leaves a 'failed' row with the reason.
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
    path = Path(ledger).expanduser()
    if not path.is_file():
        raise LedgerNotFoundError(f"no ledger at {ledger}", path=str(ledger))
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
                   "removed": [p.name for p in made.removed], "check": made.check}
    run.finish("succeeded")
    record_run(path, run)
    return BackupResult(run.run_id, str(made.snapshot.path), snapshots.format_stamp(made.snapshot.taken_at),
                        made.snapshot.last_run, made.sha256, made.size, [str(p) for p in made.removed],
                        round(made.seconds, 3), check, made.check, made.folded)


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


def restore(ledger: str | Path, snapshot: str | Path, *, before_run: str | None = None) -> RestoreResult:
    """Put a snapshot in place of the ledger and log the restore in the restored ledger.

    Args:
        snapshot: a snapshot file, or a directory of snapshots (the newest is taken, or with
            ``before_run`` the newest taken before that run started).
        before_run: a run id of the ledger's run log.

    Raises:
        LedgerInUseError: another process has the ledger open (nothing changed).
        SnapshotNotFoundError / BackupError: no fitting snapshot, or a damaged one (nothing changed).
    """
    ledger_path = Path(ledger).expanduser().resolve()
    chosen = Path(snapshot).expanduser()
    if chosen.is_dir():
        chosen = (snapshot_before_run(ledger_path, chosen, before_run) if before_run
                  else snapshots.find_snapshot(chosen, ledger_path)).path
    elif before_run:
        raise BackupError("--before-run picks a snapshot from a directory: pass the backup directory, "
                          f"not the file {chosen}")
    run = RunResult(new_run_id("restore"), "restore", stage="restore", inputs=[str(chosen)])
    try:
        done = restoring.restore_file(ledger_path, chosen)
    except MinikafkaError as exc:  # refused: the ledger is as it was, and says that a restore was refused
        if ledger_path.is_file():
            run.finish("failed", f"{type(exc).__name__}: {exc}")
            try:
                record_run(ledger_path, run, patience=5.0)
            except MinikafkaError:
                pass
        raise
    run.details = {"snapshot": str(done.snapshot.path), "taken_at": snapshots.format_stamp(done.snapshot.taken_at),
                   "last_run": done.snapshot.last_run, "replaced": str(done.replaced) if done.replaced else None}
    run.finish("succeeded")
    record_run(ledger_path, run)
    return RestoreResult(run.run_id, str(ledger_path), str(done.snapshot.path),
                         snapshots.format_stamp(done.snapshot.taken_at), done.snapshot.last_run,
                         str(done.replaced) if done.replaced else None)

"""Snapshots of the ledger file: an online, consistent copy that is complete or absent.

``take_snapshot(ledger, dest)`` copies the live ledger while stages, queues and appenders
keep writing: the -wal and the database file are copied under a read transaction that pins
one snapshot (it blocks no writer), and the copied log's committed pages are folded into
the copy (``copy_online`` says why that is one consistent state; a log without frames is
not copied, the file alone is that state). A run is in it whole or not at all, and every
append committed before the copy started is there.

Crash contract (a SIGKILL at any point):

1. the copy is written under a hidden temporary name (``.NAME.partial-PID``), which no
   listing, retention or restore ever takes for a snapshot;
2. the copy is fsynced, hashed (SHA-256: while it is written, the log's committed pages
   folded in as it goes; after SQLite's own fold for a long log), checked (``PRAGMA
   quick_check``, or with ``full_check`` ``PRAGMA integrity_check``), and the checksum
   written beside it (``NAME.sha256``, the format ``sha256sum -c`` reads);
3. only then is it renamed to ``NAME`` (``<ledger stem>-backup-<UTC time>-<last run>.sqlite``)
   and the directory fsynced. A file with the final name is therefore always complete
   and checksummed; a later backup removes the leftovers of a killed one.

The checksum file is also the snapshot's manifest: after the checksum line, a comment
line (which ``sha256sum -c`` skips) ``# minikafka {"ledger_id": ..., "ledger": ...}`` names
the ledger's identity (``identity``) and where it was. "The snapshots of a ledger" are the
ones carrying its identity, whatever their file names: retention (``keep``) removes the
oldest of them beyond the newest N, and a restore from a directory picks among them only.
A snapshot taken before ledgers had an identity belongs to a ledger without one of the same
file name.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ...errors import BackupError, SnapshotNotFoundError
from ...util.faults import checkpoint
from ..consuming import runlog
from ..transactions import identity
from . import walfold
from .filecopy import HashBehind, copy_file_steadily, fsync_path, sha256_of

SUFFIX = ".sqlite"
CHECKSUM_SUFFIX = ".sha256"
PARTIAL = ".partial-"
STAMP_FORMAT = "%Y%m%dT%H%M%S.%fZ"
NO_RUNS = "no-runs"
_NAME = re.compile(r"^(?P<stem>.+)-backup-(?P<stamp>\d{8}T\d{6}\.\d{6}Z)-(?P<run>[A-Za-z0-9._-]+)\.sqlite$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MMAP_BYTES = 1 << 40
WAL_HEADER_BYTES = 32
# a log folded in while the copy is written costs ~60 us of checksum per frame in Python; SQLite's fold
# then a second pass of SHA-256 costs ~0.5 ns per byte of the file: the first wins up to a frame per 128 KB
FOLD_BYTES_PER_FRAME, MIN_FOLD_FRAMES = 128 * 1024, 256
# bytes 18 and 19 of an SQLite file: its write and read format versions, 1 (rollback journal) or 2 (WAL)
FORMAT_VERSIONS_AT, FORMAT_VERSIONS_END, ROLLBACK_JOURNAL_VERSIONS = 18, 20, b"\x01\x01"


@dataclass(frozen=True)
class Snapshot:
    """One snapshot file.

    Attributes:
        path: the snapshot file.
        taken_at: when the copy was taken (aware UTC), from its name.
        last_run: the last committed run in it (from its name; None for a ledger without runs).
    """

    path: Path
    taken_at: datetime
    last_run: str | None
    ledger_id: str | None = None  # the identity of the ledger it was taken of (None: taken before ledgers had one)
    ledger: str | None = None  # where that ledger was when the snapshot was taken (from its manifest)

    @property
    def stem(self) -> str:
        """The ledger's file name without ``.sqlite``, from the snapshot's name."""
        return self.path.name.split("-backup-", 1)[0]

    @property
    def checksum_path(self) -> Path:
        return checksum_path(self.path)

    def describe(self) -> str:
        """``<file> (taken <time>, last run <id>)``."""
        return f"{self.path} (taken {format_stamp(self.taken_at)}, last run {self.last_run or 'none'})"


def checksum_path(path: Path) -> Path:
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def format_stamp(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def snapshot_name(ledger: Path, taken_at: datetime, last_run: str | None) -> str:
    """``<stem>-backup-<YYYYmmddTHHMMSS.ffffffZ>-<last run or no-runs>.sqlite``."""
    run = _UNSAFE.sub("_", last_run) if last_run else NO_RUNS
    return f"{ledger.stem}-backup-{taken_at.astimezone(timezone.utc).strftime(STAMP_FORMAT)}-{run}{SUFFIX}"


MANIFEST_MARK = "# minikafka "


def manifest_text(digest: str, name: str, ledger_id: str | None, ledger: Path) -> str:
    """The checksum file: ``sha256sum``'s line, then the manifest as a comment line."""
    manifest = json.dumps({"ledger_id": ledger_id, "ledger": str(ledger)})
    return f"{digest}  {name}\n{MANIFEST_MARK}{manifest}\n"


def read_manifest(path: Path) -> dict:
    """The manifest in the checksum file beside snapshot ``path`` ({} when it has none)."""
    try:
        lines = checksum_path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    for line in lines:
        if line.startswith(MANIFEST_MARK):
            try:
                found = json.loads(line[len(MANIFEST_MARK):])
            except ValueError:
                return {}
            return found if isinstance(found, dict) else {}
    return {}


def parse_snapshot(path: Path, *, manifest: bool = True) -> Snapshot | None:
    """The snapshot a file name describes (with its manifest's identity), or None for any other file."""
    match = _NAME.match(path.name)
    if not match:
        return None
    taken = datetime.strptime(match["stamp"], STAMP_FORMAT).replace(tzinfo=timezone.utc)
    run = None if match["run"] == NO_RUNS else match["run"]
    about = read_manifest(path) if manifest else {}
    ledger_id, where = about.get("ledger_id"), about.get("ledger")
    return Snapshot(path, taken, run, ledger_id if isinstance(ledger_id, str) else None,
                    where if isinstance(where, str) else None)


def list_snapshots(dest: Path, ledger: Path | None = None) -> list[Snapshot]:
    """The complete snapshots in ``dest`` (of ``ledger`` only, when given: see ``of_ledger``), newest first."""
    if not dest.is_dir():
        return []
    found = []
    for path in dest.iterdir():
        snap = parse_snapshot(path)
        if snap is None or not path.is_file():
            continue
        found.append(snap)
    found.sort(key=lambda s: (s.taken_at, s.path.name), reverse=True)
    if ledger is not None:
        return of_ledger(found, identity.identity_of_file(ledger), Path(ledger).stem)
    return found


def of_ledger(found: list[Snapshot], ledger_id: str | None, stem: str) -> list[Snapshot]:
    """The snapshots of the ledger with identity ``ledger_id``; of a ledger without one yet
    (``ledger_id`` None), the snapshots without one whose file name is of ``stem``."""
    if ledger_id is not None:
        return [s for s in found if s.ledger_id == ledger_id]
    return [s for s in found if s.ledger_id is None and s.stem == stem]


def describe_ledgers(found: list[Snapshot]) -> list[str]:
    """One phrase per ledger that ``found`` (newest first) holds snapshots of, newest first."""
    groups: dict[tuple, list[Snapshot]] = {}
    for snap in found:
        groups.setdefault((snap.ledger_id,) if snap.ledger_id else (None, snap.stem), []).append(snap)
    out = []
    for key, snaps in groups.items():
        newest = snaps[0]
        who = (f"ledger {key[0]}" + (f" (was {newest.ledger})" if newest.ledger else "") if key[0] else
               f"a ledger named {key[1]} without an identity (taken before ledgers had one)")
        out.append(f"{len(snaps)} snapshot(s) of {who}, newest {newest.path.name}")
    return out


QUICK_CHECK, FULL_CHECK = "quick_check", "integrity_check"


def integrity_problems(path: Path, *, full: bool = True) -> list[str]:
    """What ``PRAGMA integrity_check`` (``full``) or ``PRAGMA quick_check`` reports on the
    file (empty when it is sound).

    ``quick_check`` reads every page and checks the structure of every b-tree, the free
    list and each row's columns against their table's declared types and constraints; it
    leaves out only the comparison of each index with its table (every row indexed, no
    index entry without a row), which ``integrity_check`` adds: about half its time on a
    gigabyte ledger. So ``quick_check`` finds a damaged or truncated page, not an index page
    and a table page from two different states that are each well-formed; the copy cannot
    mix states by construction (``copy_online``), and ``restore`` runs ``integrity_check``
    before it puts a snapshot in place.
    """
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")  # pages read in place, without a copy each
        rows = [r[0] for r in conn.execute(f"PRAGMA {FULL_CHECK if full else QUICK_CHECK}(20)")]
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    finally:
        conn.close()
    return [] if rows == ["ok"] else rows


def verify_checksum(path: Path) -> None:
    """Raise BackupError unless ``path`` matches the checksum stored beside it."""
    side = checksum_path(path)
    if not side.is_file():
        raise BackupError(f"{path}: no checksum file {side.name} beside it; not a complete snapshot")
    words = side.read_text(encoding="utf-8", errors="replace").split()
    expected = words[0] if words else ""
    actual = sha256_of(path)
    if actual != expected:
        raise BackupError(f"{path}: checksum mismatch (file {actual[:12]}..., {side.name} {expected[:12]}...); "
                          "the snapshot was changed or damaged after it was taken")


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers(dest: Path) -> list[Path]:
    """Remove what killed backups left in ``dest``: partial copies of dead processes, and
    checksum files whose snapshot was never renamed into place."""
    removed = []
    for path in dest.iterdir() if dest.is_dir() else ():
        name = path.name
        if name.startswith(".") and PARTIAL in name:
            pid_text = name.rsplit(PARTIAL, 1)[1].split(".", 1)[0]
            if pid_text.isdigit() and not _pid_alive(int(pid_text)):
                path.unlink(missing_ok=True)
                removed.append(path)
        elif name.endswith(CHECKSUM_SUFFIX) and not path.with_name(name[:-len(CHECKSUM_SUFFIX)]).exists():
            if _NAME.match(name[:-len(CHECKSUM_SUFFIX)]):
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


@dataclass(frozen=True)
class OnlineCopy:
    """What ``copy_online`` made: whether write-ahead-log frames were folded into the copy,
    and the hashing that followed the copy as it was written (None when SQLite folded a
    long log in afterwards, or no checksum was asked for): its ``finish()`` gives the copy's SHA-256,
    ``close()`` drops it."""

    folded: bool
    hashing: HashBehind | None = None

    def close(self) -> None:
        if self.hashing is not None:
            self.hashing.close()


def copy_online(ledger: Path, target: Path, *, busy_timeout_ms: int = 30_000, checksum: bool = True,
                on_bytes: Callable[[int, int], None] | None = None) -> OnlineCopy:
    """Copy the live ledger into ``target`` (a new file) as one consistent state.

    In WAL mode the copy is a plain file copy under a pinned snapshot: a read transaction
    is opened first (it blocks no writer), then the -wal and the database file are copied
    as they are, and the log's committed frames are folded into the copy of the file, as
    SQLite's recovery and checkpoint would (``walfold``: frames up to the last intact
    commit). Why that is one consistent state:

    - while the read transaction lasts, no checkpoint copies a frame past its snapshot
      into the database file, and the log is not restarted under it (unless the snapshot
      is the database file alone, below), so the frames up to the snapshot stay in the log
      and every page of the database file is either as of the snapshot or also in those
      frames, whichever moment the file is copied at;
    - the log is copied first, after the snapshot was pinned, so those frames are in the
      copy of the log and replace whatever the database file held for their pages;
    - frames committed after the snapshot may be in the copied log too: the copy is then a
      later committed state, never part of a transaction (a torn or uncommitted tail fails
      its checksum or has no commit frame, and is left out);
    - a reader whose snapshot is the database file alone (the log was fully checkpointed
      when it began) lets a writer restart the log, but no checkpoint can change the file
      while it reads: a log whose header changed while it was copied is left out (the file
      is the snapshot), and one restarted before holds only commits that follow the file's.

    The copy is marked as a rollback-journal database (bytes 18 and 19 of the file format
    set to 1, what leaving WAL mode writes there), and with ``checksum`` hashed while it is
    written, read back a slice behind the copy, each slice once its logged pages are in:
    the digest is the finished file's, with no second pass over it. A log of more frames
    than checking them in Python is worth (about one per 128 KB of the file) is folded in
    by SQLite itself (the copy opens it and leaves WAL mode), and the caller hashes after.

    A ledger in another journal mode is copied with SQLite's online backup API instead.
    """
    src = sqlite3.connect(str(ledger), isolation_level=None)
    log_copy = Path(f"{target}-wal")
    try:
        src.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        if str(src.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            _copy_with_backup_api(src, target)
            return OnlineCopy(False)
        src.execute("BEGIN")
        src.execute("SELECT count(*) FROM sqlite_schema").fetchone()  # the read transaction pins the snapshot
        try:
            wal = Path(f"{ledger}-wal")
            if _log_frames_bytes(wal) == 0:
                return OnlineCopy(False, _copy_file_alone(ledger, target, checksum, on_bytes))
            header = _log_header(wal)
            copy_file_steadily(wal, log_copy)
            checkpoint("backup:log-copied")
            if _log_header(wal) != header or _log_header(log_copy) != header:  # restarted meanwhile: the file alone
                log_copy.unlink()
                return OnlineCopy(False, _copy_file_alone(ledger, target, checksum, on_bytes))
            max_frames = max(os.stat(ledger).st_size // FOLD_BYTES_PER_FRAME, MIN_FOLD_FRAMES)
            committed = walfold.read_log(log_copy, max_frames=max_frames)
            if committed is not None and not committed.frames:  # nothing committed in it: the file alone
                log_copy.unlink()
                return OnlineCopy(False, _copy_file_alone(ledger, target, checksum, on_bytes))
            if committed is not None:
                hashing = _copy_folding(ledger, target, log_copy, committed, checksum, on_bytes)
                log_copy.unlink()
                return OnlineCopy(True, hashing)
            copy_file_steadily(ledger, target, on_bytes=on_bytes)
        finally:
            src.execute("COMMIT")
    finally:
        src.close()
    Path(f"{target}-shm").unlink(missing_ok=True)
    dst = sqlite3.connect(str(target), isolation_level=None)
    try:
        # leaving WAL mode folds the copied log into the file: one self-contained file, no -wal or -shm
        mode = str(dst.execute("PRAGMA journal_mode = DELETE").fetchone()[0]).lower()
    finally:
        dst.close()
    if mode != "delete" or log_copy.exists():
        raise sqlite3.OperationalError(f"could not fold the copied write-ahead log into {target.name}")
    fsync_path(target)
    return OnlineCopy(True)


def _log_header(wal: Path) -> bytes:
    """The write-ahead log's 32-byte header (its salts change whenever the log restarts)."""
    try:
        with open(wal, "rb") as fh:
            return fh.read(WAL_HEADER_BYTES)
    except FileNotFoundError:
        return b""


class _MarkedCopy:
    """A snapshot file being written: page 1 marked as a rollback-journal database once it is
    final, and (with ``checksum``) hashed behind the copy; the hashing stops on an error."""

    def __init__(self, target: Path, checksum: bool):
        target.touch()  # the hashing thread opens it as the copy starts
        self.hasher = HashBehind(target) if checksum else None
        self.marked = False

    def final_upto(self, fd: int, final: int) -> None:
        """The first ``final`` bytes of the copy will not change again."""
        if not self.marked and final >= FORMAT_VERSIONS_END:
            os.pwrite(fd, ROLLBACK_JOURNAL_VERSIONS, FORMAT_VERSIONS_AT)
            self.marked = True
        if self.marked and self.hasher is not None:
            self.hasher.upto(final)

    def done(self, what: str) -> HashBehind | None:
        if not self.marked:
            raise sqlite3.DatabaseError(f"{what} too short to be an SQLite database")
        return self.hasher

    def __enter__(self) -> _MarkedCopy:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is not None and self.hasher is not None:
            self.hasher.close()


def _copy_folding(ledger: Path, target: Path, log_copy: Path, committed: walfold.CommittedLog, checksum: bool,
                  on_bytes: Callable[[int, int], None] | None) -> HashBehind | None:
    """Copy the database file with the log's committed pages written over it as the copy
    goes, marked as a rollback-journal database; with ``checksum`` the hashing that follows it."""
    folding = walfold.FoldedPages(log_copy, committed)
    try:
        with _MarkedCopy(target, checksum) as copy:
            copied = copy_file_steadily(
                ledger, target, on_copied=lambda fd, done: copy.final_upto(fd, folding.apply_upto(fd, done)),
                on_bytes=on_bytes)
            fd = os.open(target, os.O_RDWR)
            try:
                copy.final_upto(fd, folding.finish(fd, copied))
                os.fsync(fd)
            finally:
                os.close(fd)
            return copy.done(f"{ledger.name} and its log are")
    finally:
        folding.close()


def _log_frames_bytes(wal: Path) -> int:
    """How many bytes of frames the write-ahead log holds beyond its header (0: none, or no log)."""
    try:
        return max(wal.stat().st_size - WAL_HEADER_BYTES, 0)
    except FileNotFoundError:
        return 0


def _copy_file_alone(ledger: Path, target: Path, checksum: bool,
                     on_bytes: Callable[[int, int], None] | None) -> HashBehind | None:
    """Copy the database file of a ledger whose log holds nothing, as a rollback-journal
    database; with ``checksum`` the hashing that follows it (still finishing the last slice)."""
    with _MarkedCopy(target, checksum) as copy:
        copy_file_steadily(ledger, target, on_copied=copy.final_upto, on_bytes=on_bytes)
        return copy.done(f"{ledger.name} is")


def _copy_with_backup_api(src: sqlite3.Connection, target: Path) -> None:
    dst = sqlite3.connect(str(target), isolation_level=None)
    try:
        dst.execute("PRAGMA journal_mode = OFF")  # a new private file: nothing to roll back to
        dst.execute("PRAGMA synchronous = OFF")  # fsynced once, below
        src.backup(dst, pages=-1)  # one step: one read transaction, one consistent state
        dst.execute("PRAGMA journal_mode = DELETE")
    finally:
        dst.close()
    fsync_path(target)


def last_committed_run_in(path: Path) -> tuple[str | None, str | None]:
    """The last committed run in the copy at ``path``, and the identity of its ledger."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return runlog.last_committed_run(conn), identity.read_identity(conn)
    finally:
        conn.close()


@dataclass
class SnapshotTaken:
    """What ``take_snapshot`` made: the snapshot, its checksum and size, what retention removed."""

    snapshot: Snapshot
    sha256: str
    size: int
    removed: list[Path]
    seconds: float
    folded: bool = False  # write-ahead-log frames were folded into the copy
    check: str | None = QUICK_CHECK  # the PRAGMA that checked the copy (None: not checked)


def take_snapshot(ledger: str | Path, dest: str | Path, *, keep: int | None = None,
                  check: bool = True, full_check: bool = False, clock: Callable[[], datetime] | None = None,
                  progress: Callable[[str], None] | None = None) -> SnapshotTaken:
    """Copy the live ledger into ``dest`` as a complete, checked, checksummed snapshot.

    Args:
        ledger: the ledger file (it keeps being written meanwhile).
        dest: the directory of snapshots (created when missing).
        keep: afterwards keep only the newest ``keep`` snapshots of this ledger there.
        check: check the copy before it gets its final name: ``PRAGMA quick_check`` (every
            page and b-tree; see ``integrity_problems``), or with ``full_check``
            ``PRAGMA integrity_check`` (each index against its table as well).
        clock: the time source naming the snapshot (default: now, UTC).
        progress: called with a short text as the backup moves on ("copying 256 of 1,024 MB",
            "checking and checksumming"), every tenth of the copy at most.

    Raises:
        BackupError: the ledger is missing, the copy failed its check, or ``keep`` < 1
            (nothing with a snapshot's name is left behind).
    """
    t0 = time.perf_counter()
    ledger, dest = Path(ledger).expanduser().resolve(), Path(dest).expanduser()
    if keep is not None and keep < 1:
        raise BackupError(f"keep must be at least 1 (the snapshot just taken), got {keep}")
    if not ledger.is_file():
        raise BackupError(f"no ledger at {ledger}")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackupError(f"cannot create the backup directory {dest}: {exc}") from exc
    remove_leftovers(dest)
    taken_at = (clock or (lambda: datetime.now(timezone.utc)))()
    partial = dest / f".{ledger.stem}-backup{PARTIAL}{os.getpid()}{SUFFIX}"
    side, copied = None, None
    try:
        partial.unlink(missing_ok=True)
        try:
            copied = copy_online(ledger, partial, on_bytes=_tenths(progress))
        except (sqlite3.Error, OSError) as exc:
            raise BackupError(f"cannot copy {ledger}: {exc}") from exc
        checkpoint("backup:copied")
        if progress is not None:
            progress("checking integrity and checksumming")
        if copied.hashing is not None:  # hashed as it was written: the check runs while the hashing catches up
            problems = integrity_problems(partial, full=full_check) if check else []
            digest = copied.hashing.finish()
        else:
            with ThreadPoolExecutor(max_workers=1) as pool:  # hashing and checking read the copy side by side
                hashing = pool.submit(sha256_of, partial)
                problems = integrity_problems(partial, full=full_check) if check else []
                digest = hashing.result()
        pragma = (FULL_CHECK if full_check else QUICK_CHECK) if check else None
        if problems:
            raise BackupError(f"the copy of {ledger} failed PRAGMA {pragma}: {'; '.join(problems[:3])}")
        last_run, ledger_id = last_committed_run_in(partial)
        final = dest / snapshot_name(ledger, taken_at, last_run)
        side = checksum_path(final)
        _write_synced(side, manifest_text(digest, final.name, ledger_id, ledger))
        size = partial.stat().st_size
        checkpoint("backup:before-rename")
        os.replace(partial, final)
        fsync_path(dest)
    except BaseException:
        if copied is not None:
            copied.close()
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
            leftover.unlink(missing_ok=True)
        if side is not None and not side.with_name(side.name[:-len(CHECKSUM_SUFFIX)]).exists():
            side.unlink(missing_ok=True)
        raise
    snap = Snapshot(final, taken_at, last_run, ledger_id, str(ledger))
    removed = prune_snapshots(dest, snap, keep) if keep is not None else []
    return SnapshotTaken(snap, digest, size, removed, time.perf_counter() - t0, copied.folded, pragma)


def _tenths(progress: Callable[[str], None] | None) -> Callable[[int, int], None] | None:
    """``on_bytes`` for a copy that tells ``progress`` at each tenth of the way."""
    if progress is None:
        return None
    told = [-1]

    def on_bytes(done: int, size: int) -> None:
        tenth = 10 * done // max(size, 1)
        if tenth != told[0]:
            told[0] = tenth
            progress(f"copying {done / 1e6:,.0f} of {size / 1e6:,.0f} MB")

    return on_bytes


def prune_snapshots(dest: Path, taken: Snapshot, keep: int) -> list[Path]:
    """Remove the snapshots in ``dest`` of the ledger ``taken`` is of (its identity) beyond the
    newest ``keep`` (and their checksums); other ledgers' snapshots are never touched."""
    removed = []
    for snap in of_ledger(list_snapshots(dest), taken.ledger_id, taken.stem)[keep:]:
        snap.path.unlink(missing_ok=True)
        snap.checksum_path.unlink(missing_ok=True)
        removed.append(snap.path)
    return removed


def find_snapshot(dest: Path, ledger: Path, *, before: datetime | None = None) -> Snapshot:
    """The newest snapshot of ``ledger`` in ``dest`` (taken before ``before``, when given).

    The snapshots of ``ledger`` are those carrying its identity (``of_ledger``). A ledger
    that does not exist yet (a fresh machine) takes the snapshots of the one ledger ``dest``
    holds snapshots of.

    Raises:
        SnapshotNotFoundError: none fits (the message names the ledgers ``dest`` holds
            snapshots of), or ``ledger`` does not exist and ``dest`` holds snapshots of
            several ledgers.
    """
    every = list_snapshots(dest)
    if not ledger.exists():
        ledgers = describe_ledgers(every)
        if len(ledgers) > 1:
            raise SnapshotNotFoundError(
                f"{dest} holds snapshots of {len(ledgers)} ledgers: {'; '.join(ledgers)}; {ledger} does not exist "
                "to say which is its own: pass the snapshot file to restore instead of the directory")
        candidates = every
    else:
        candidates = of_ledger(every, identity.identity_of_file(ledger), ledger.stem)
    for snap in candidates:
        if before is None or snap.taken_at < before:
            return snap
    when = f" taken before {format_stamp(before)}" if before is not None else ""
    target = identity.identity_of_file(ledger)
    text = f"no snapshot of {ledger}" + (f" (ledger {target})" if target else "") + f"{when} in {dest}"
    others = [s for s in every if s not in candidates]
    if others:
        text += (f"; it holds {'; '.join(describe_ledgers(others))}. To put another ledger's data in place of "
                 f"{ledger}, pass that snapshot file with --from-other-ledger")
    raise SnapshotNotFoundError(text)


def snapshot_figures(ledger: str | Path, backups: Path) -> tuple[float | None, int]:
    """(when the newest snapshot of this ledger in ``backups`` was taken, how many there are): the
    snapshots whose manifest names this ledger's identity (``list_snapshots``)."""
    found = list_snapshots(Path(backups), Path(ledger).resolve())
    return (found[0].taken_at.timestamp() if found else None), len(found)

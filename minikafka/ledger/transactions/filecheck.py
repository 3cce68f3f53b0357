"""What the ledger file sits on and how its write-ahead log is doing (for ``doctor``).

- ``filesystem_type(path)``: the type of the mount holding ``path`` (``/proc/mounts``, the
  longest mount point that contains it); ``is_network_filesystem`` says whether SQLite's
  locks can be trusted there (not on NFS, SMB/CIFS, sshfs and the like);
- ``journal_mode(path)``: the file's journal mode, read without writing;
- ``wal_state(path)``: the -wal file's size and a PASSIVE checkpoint's report: frames in
  the log, frames copied into the database; fewer copied than logged means a reader holds
  an old snapshot (a long read transaction pins the log).

- ``ledger_file_problem(path)``: why the file is not a ledger (empty, not an SQLite
  database, without minikafka's tables), read without writing; ``ledger_facts(path)`` its
  format and identity; ``quick_check_problems(path)`` what ``PRAGMA quick_check`` finds
  (every page and b-tree read once).

Checkpoint policy (all of minikafka): only PASSIVE checkpoints, which never wait for
readers or block writers, so a replicator such as Litestream, which checkpoints the same
file from its own process, is never fought: no TRUNCATE or RESTART checkpoint runs on a
ledger another process may hold (``restore`` runs one only after taking the file
exclusively).
"""

from __future__ import annotations

import functools
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ...errors import LedgerError
from . import identity, upgrade

NETWORK_FILESYSTEMS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "ceph", "glusterfs", "lustre",
                       "gpfs", "fuse.sshfs", "sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone", "davfs",
                       "fuse.davfs2", "beegfs", "orangefs"}


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


MOUNTS = "/proc/mounts"
ALLOW_ENV = "MINIKAFKA_ALLOW_NETWORK_FS"  # =1: open a ledger on a network file system anyway


def filesystem_type(path: str | Path, mounts: str | None = None) -> str | None:
    """The file system type of the mount holding ``path`` (None when unknown)."""
    target = str(Path(path).expanduser().resolve())
    best, kind = "", None
    try:
        lines = Path(mounts or MOUNTS).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = _unescape(parts[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind


def is_network_filesystem(kind: str | None) -> bool:
    return kind is not None and (kind in NETWORK_FILESYSTEMS or kind.split(".")[-1] in NETWORK_FILESYSTEMS)


@functools.lru_cache(maxsize=256)
def _cached_type(directory: str, mounts: str) -> str | None:
    """``filesystem_type``, read once per directory per process (every ledger open asks)."""
    return filesystem_type(directory, mounts)


def refuse_network_filesystem(path: str | Path) -> None:
    """Raise ``LedgerError`` when the directory of ``path`` is on a network file system.

    SQLite's locks (and so every transaction's isolation, and WAL's shared memory) are not
    reliable on NFS, SMB and the like: two writers can corrupt the file. Only the ledger must
    stay local; staging is what other hosts share. ``$MINIKAFKA_ALLOW_NETWORK_FS=1`` opens it
    anyway (one host, one process at a time, at your own risk).
    """
    if os.environ.get(ALLOW_ENV) == "1":
        return
    directory = Path(path).expanduser().resolve().parent
    kind = _cached_type(str(directory), MOUNTS)
    if is_network_filesystem(kind):
        raise LedgerError(
            f"cannot open ledger {str(path)!r}: {directory} is on {kind}, a network file system, where SQLite's "
            "locks are not reliable and a ledger can be corrupted; keep the ledger on a local disk (executors on "
            f"other hosts share a staging location, not the ledger), or set {ALLOW_ENV}=1 to open it anyway")


def journal_mode(path: str | Path) -> str:
    """The file's journal mode (``wal``, ``delete``, ...), read through a read-only connection."""
    conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    finally:
        conn.close()


@dataclass(frozen=True)
class WalState:
    """The write-ahead log: its size in bytes, and what a PASSIVE checkpoint managed.

    Attributes:
        wal_bytes: size of the -wal file (0 when there is none).
        frames: frames in the log (-1 when the checkpoint could not run).
        copied: frames now in the database file; below ``frames``, a reader pins the rest.
        busy: the checkpoint could not run at all (another checkpoint or a writer held it).
    """

    wal_bytes: int
    frames: int
    copied: int
    busy: bool

    @property
    def pinned(self) -> int:
        return max(0, self.frames - self.copied) if self.frames >= 0 else 0


def wal_state(path: str | Path, *, busy_timeout_ms: int = 2000) -> WalState:
    """The -wal file's size and a PASSIVE checkpoint's report (never waits for readers)."""
    path = Path(path).resolve()
    wal = Path(f"{path}-wal")
    size = wal.stat().st_size if wal.exists() else 0
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        return WalState(size, -1, -1, True)
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.OperationalError:
        return WalState(size, -1, -1, True)
    finally:
        conn.close()
    return WalState(size, int(frames), int(copied), bool(busy))


SQLITE_HEADER = b"SQLite format 3\x00"
MMAP_BYTES = 1 << 40


def ledger_file_problem(path: str | Path) -> str | None:
    """Why the file at ``path`` is not a minikafka ledger (None when it is one), without writing."""
    path = Path(path).expanduser()
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    if not head:
        return f"{path} is an empty file, not a ledger"
    if head != SQLITE_HEADER:
        return f"{path} is not an SQLite database (not a ledger: a text file, or a damaged first page)"
    try:
        found = ledger_facts(path)[0]
    except sqlite3.Error as exc:
        return f"cannot read {path}: {exc}"
    if found is None:
        return f"{path} is an SQLite database without minikafka's tables, not a ledger"
    return None


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)


def ledger_facts(path: str | Path) -> tuple[int | None, str | None]:
    """(format, identity) stored in the ledger at ``path`` (None, None: not a ledger), read-only.

    Raises:
        sqlite3.Error: the file cannot be read as an SQLite database.
    """
    conn = _read_only(Path(path))
    try:
        return upgrade.stored_format(conn), identity.read_identity(conn)
    finally:
        conn.close()


def quick_check_problems(path: str | Path, *, limit: int = 10) -> list[str]:
    """What ``PRAGMA quick_check`` reports on the file (empty when it is sound), read-only."""
    try:
        conn = _read_only(Path(path))
    except sqlite3.Error as exc:
        return [str(exc)]
    try:
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")  # pages read in place, without a copy each
        rows = [str(r[0]) for r in conn.execute(f"PRAGMA quick_check({int(limit)})")]
    except sqlite3.Error as exc:
        return [str(exc)]
    finally:
        conn.close()
    return [] if rows == ["ok"] else rows


def damage_advice(path: str | Path) -> str:
    """What to do about a damaged ledger file."""
    return (f"the file is damaged: stop what writes it, then restore the newest good snapshot "
            f"('minikafka restore BACKUP_DIR --source {path}'; the damaged file is kept aside), or save what "
            "can be read with sqlite3's .recover")

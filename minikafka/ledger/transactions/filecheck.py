"""What the ledger file sits on and how its write-ahead log is doing (for ``doctor``).

- ``filesystem_type(path)``: the type of the mount holding ``path`` (``/proc/mounts``, the
  longest mount point that contains it); ``is_network_filesystem`` says whether SQLite's
  locks can be trusted there (not on NFS, SMB/CIFS, sshfs and the like);
- ``journal_mode(path)``: the file's journal mode, read without writing;
- ``wal_state(path)``: the -wal file's size and a PASSIVE checkpoint's report: frames in
  the log, frames copied into the database; fewer copied than logged means a reader holds
  an old snapshot (a long read transaction pins the log).

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

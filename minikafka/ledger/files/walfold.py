"""Reading a copied write-ahead log the way SQLite's recovery does, to fold it into a copy.

``read_log(path)`` returns the committed content of a -wal file: for each page, where its
newest version up to the last intact commit is, and the database's size in pages after
that commit. The rules are SQLite's (https://www.sqlite.org/fileformat2.html#walformat):

- the 32-byte header holds a magic number (its low bit: the byte order of the checksums),
  the format version 3007000, the page size, two salts and a checksum of its first 24 bytes;
- each frame is a 24-byte header (page number; the database size in pages for the frame
  that commits a transaction, else 0; the two salts; a checksum) and one page;
- a frame is valid while its salts are the header's and its checksum, which runs on from
  the previous frame's over the frame header's first 8 bytes and the page, is right; the
  log ends at the first frame that is not;
- only frames up to the last valid commit frame count: a transaction is in whole or not.

``FoldedPages`` applies those pages to a copy of the database file as the copy is written
(``apply_upto``), so that the finished file is what SQLite's checkpoint would leave, and
can be hashed as it is written. No SQL here, and nothing is written to the log.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

HEADER_BYTES = 32
FRAME_HEADER_BYTES = 24
MAGIC_LITTLE, MAGIC_BIG = 0x377F0682, 0x377F0683
FORMAT_VERSION = 3007000
MASK = 0xFFFFFFFF


def _checksum(data: bytes, big_endian: bool, s0: int, s1: int) -> tuple[int, int]:
    """SQLite's WAL checksum of ``data`` (a multiple of 8 bytes), running on from (s0, s1)."""
    words = struct.unpack(f"{'>' if big_endian else '<'}{len(data) // 4}I", data)
    for a, b in zip(words[0::2], words[1::2]):
        s0 = (s0 + a + s1) & MASK
        s1 = (s1 + b + s0) & MASK
    return s0, s1


@dataclass(frozen=True)
class CommittedLog:
    """The committed content of a write-ahead log.

    Attributes:
        page_size: bytes per page.
        pages: page number -> offset in the log file of its newest committed version.
        db_pages: the database's size in pages after the last commit.
        frames: the valid frames up to and including the last commit.
    """

    page_size: int
    pages: dict[int, int]
    db_pages: int
    frames: int


NOTHING = CommittedLog(0, {}, 0, 0)


def read_log(path: Path, *, max_frames: int | None = None) -> CommittedLog | None:
    """The committed frames of the log at ``path`` (``NOTHING``, with ``frames`` 0, when its
    header is not valid or no commit is; None when it holds more than ``max_frames`` frames:
    checking each costs more than SQLite's own fold then)."""
    with open(path, "rb") as fh:
        header = fh.read(HEADER_BYTES)
        if len(header) < HEADER_BYTES:
            return NOTHING
        magic, version, page_size, _seq, salt1, salt2, c0, c1 = struct.unpack(">8I", header)
        if magic not in (MAGIC_LITTLE, MAGIC_BIG) or version != FORMAT_VERSION:
            return NOTHING
        if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
            return NOTHING
        big = magic == MAGIC_BIG
        s0, s1 = _checksum(header[:24], big, 0, 0)
        if (s0, s1) != (c0, c1):
            return NOTHING
        frame_bytes = FRAME_HEADER_BYTES + page_size
        if max_frames is not None and (os.fstat(fh.fileno()).st_size - HEADER_BYTES) // frame_bytes > max_frames:
            return None
        pending: dict[int, int] = {}
        committed: dict[int, int] = {}
        db_pages, frames, offset = 0, 0, HEADER_BYTES
        while True:
            frame = fh.read(frame_bytes)
            if len(frame) < frame_bytes:
                break
            pgno, commit, fsalt1, fsalt2, f0, f1 = struct.unpack(">6I", frame[:FRAME_HEADER_BYTES])
            if pgno == 0 or (fsalt1, fsalt2) != (salt1, salt2):
                break
            s0, s1 = _checksum(frame[:8], big, s0, s1)
            s0, s1 = _checksum(frame[FRAME_HEADER_BYTES:], big, s0, s1)
            if (s0, s1) != (f0, f1):
                break
            pending[pgno] = offset + FRAME_HEADER_BYTES
            offset += frame_bytes
            if commit:
                committed.update(pending)
                pending.clear()
                db_pages, frames = commit, (offset - HEADER_BYTES) // frame_bytes
    if not frames:
        return NOTHING
    return CommittedLog(page_size, committed, db_pages, frames)


class FoldedPages:
    """Writes a log's committed pages into a copy of the database file as the copy grows.

    ``apply_upto(fd, done)``: every logged page that lies wholly within the copy's first
    ``done`` bytes, and was not written yet, is written over the copied bytes (pages past
    the database's committed size are left out); returns how many bytes of the copy are
    final. ``finish(fd, copied)``: the file cut to the committed size, and the logged pages
    past the end of the copied file appended; returns the final size.
    """

    def __init__(self, log: Path, committed: CommittedLog) -> None:
        self._log = log
        self._ps = committed.page_size
        self._size = committed.db_pages * committed.page_size
        self._order = sorted(p for p in committed.pages if p <= committed.db_pages)
        self._pages = committed.pages
        self._next = 0  # index into _order of the first page not written yet
        self._fh = open(log, "rb")

    @property
    def size(self) -> int:
        return self._size

    def _write(self, fd: int, upto_page: int) -> None:
        while self._next < len(self._order) and self._order[self._next] <= upto_page:
            pgno = self._order[self._next]
            page = os.pread(self._fh.fileno(), self._ps, self._pages[pgno])
            if len(page) != self._ps:
                raise OSError(f"the copied log {self._log.name} ended inside page {pgno}")
            os.pwrite(fd, page, (pgno - 1) * self._ps)
            self._next += 1

    def apply_upto(self, fd: int, done: int) -> int:
        whole = min(done, self._size) // self._ps
        self._write(fd, whole)
        return whole * self._ps

    def finish(self, fd: int, copied: int) -> int:
        os.ftruncate(fd, self._size)
        whole = self._size // self._ps
        missing = [p for p in range(copied // self._ps + 1, whole + 1) if p not in self._pages]
        if missing:
            raise OSError(f"pages {missing[:3]} lie past the copied database file and are not in its log")
        self._write(fd, whole)
        return self._size

    def close(self) -> None:
        self._fh.close()

"""Row files: one batch of a topic's checked rows as a standalone SQLite file, inserted
into the topic by one ``INSERT ... SELECT`` (backfill's JSONL path).

A worker that validated a chunk of a dump writes its rows here instead of handing them to
the driver as Python objects: the driver's commit then runs in SQLite's engine alone,
with no per-row Python (no decoding to Python values, no tuples, no parameter binding).
Measured on 970,008 demo rows: the commit's part on the driver took about half the time
of reading the same rows from Arrow and inserting them with ``executemany``.

The file (written by :func:`write_row_file`, complete or not at all: the caller renames
it into place):

- ``mk_rows (seq INTEGER PRIMARY KEY, c0, c1, ... [, k])``: the accepted rows in line order,
  ``seq`` 1, 2, 3..., ``c<i>`` the storage value of the topic's i-th field (columns
  without a type: SQLite keeps each value as it was given), and optionally ``k``, the
  row's dedup hash computed by the writer (``keys.row_hashes``; NULL: the commit computes
  it in SQL);
- ``mk_refused (line INTEGER PRIMARY KEY, error TEXT NOT NULL, payload TEXT)``: the
  lines refused, with ingest's reason and the raw text;
- ``mk_about (version, fields, lines)``: the format, the field count (both checked on
  open) and the accepted rows' line numbers in ``seq`` order, as one blob of 64-bit
  little-endian integers (a line column would cost the writer a tuple per row).

The ledger attaches the file under an alias (:data:`ALIAS`, or ``ALIAS`` and a number
when several files are attached at once: one transaction may insert slices of several
files), outside any transaction (SQLite refuses ``ATTACH`` inside one), and reads it in
slices of at most N accepted rows (:class:`RowFile`); each slice is inserted with the
caller's transaction (``table.TopicTable.insert_row_file_in_current_transaction``).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ...errors import StagingError
from .layout import TopicLayout

ALIAS = "mk_rowfile"
MAX_ATTACHED = 8  # row files attached at once at most (SQLite's own limit is 10 databases besides main)
VERSION = 1
PAGE_BYTES = 65536  # a row file's pages (written once, read once from start to end)


def write_row_file(path: str, width: int, rows: Sequence[tuple], lines: Sequence[int],
                   refused: Sequence[tuple[int, str, str | None]],
                   hashes: Sequence[int | None] | None = None) -> None:
    """Write ``rows`` (tuples of ``width`` storage values, with their ``lines``, increasing)
    and ``refused`` ((line, error, payload)) to a new SQLite file at ``path``; ``hashes``:
    the rows' dedup hashes (``keys.row_hashes``, None where SQL computes it), column ``k``.

    No journal and no fsync: the file is scratch until the caller renames it into place,
    and a file that was not renamed is never read.
    """
    if len(rows) != len(lines):
        raise ValueError(f"{len(rows)} rows but {len(lines)} line numbers")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        # large pages: a chunk of 66,000 dump lines written in 0.097 s against 0.119 s (4 KiB pages)
        conn.execute(f"PRAGMA page_size = {PAGE_BYTES}")
        cols = _value_columns(width)
        if hashes is not None:
            if len(hashes) != len(rows):
                raise ValueError(f"{len(rows)} rows but {len(hashes)} hashes")
            cols = f"{cols}{', ' if width else ''}k"
            rows = [(*row, h) for row, h in zip(rows, hashes)]
        stored = width + (hashes is not None)
        conn.execute(f"CREATE TABLE mk_rows (seq INTEGER PRIMARY KEY{', ' if stored else ''}{cols})")
        conn.execute("CREATE TABLE mk_refused (line INTEGER PRIMARY KEY, error TEXT NOT NULL, payload TEXT)")
        conn.execute("CREATE TABLE mk_about (version INTEGER NOT NULL, fields INTEGER NOT NULL, lines BLOB NOT NULL)")
        conn.execute("BEGIN")
        packed = array("q", lines)
        if sys.byteorder != "little":
            packed.byteswap()
        conn.execute("INSERT INTO mk_about VALUES (?, ?, ?)", (VERSION, width, packed.tobytes()))
        if stored:
            marks = ", ".join("?" for _ in range(stored))
            conn.executemany(f"INSERT INTO mk_rows ({cols}) VALUES ({marks})", rows)
        else:
            conn.executemany("INSERT INTO mk_rows DEFAULT VALUES", [()] * len(rows))
        conn.executemany("INSERT INTO mk_refused VALUES (?, ?, ?)", refused)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _value_columns(width: int) -> str:
    """``c0, c1, ...``: the columns of ``mk_rows`` that hold the topic's field values."""
    return ", ".join(f"c{i}" for i in range(width))


@dataclass(frozen=True)
class Slice:
    """Accepted rows ``first..last`` (by ``seq``) of an attached row file, and what the
    file refused up to ``last_line`` (and past the previous slice's last line)."""

    first: int
    last: int
    last_line: int
    refused: list[tuple[int, str, str | None]]  # (line, error, payload)

    @property
    def accepted(self) -> int:
        return self.last - self.first + 1

    @property
    def rows_read(self) -> int:
        return self.accepted + len(self.refused)


class RowFile:
    """A row file attached to the ledger's connection under ``alias`` (see :func:`attached`)."""

    def __init__(self, conn: sqlite3.Connection, path: str, layout: TopicLayout, alias: str = ALIAS):
        self.conn, self.path, self.layout, self.alias = conn, path, layout, alias
        try:
            about = conn.execute(f"SELECT version, fields, lines FROM {alias}.mk_about").fetchall()
            self.rows = conn.execute(f"SELECT count(*) FROM {alias}.mk_rows").fetchone()[0]
            self.refused = conn.execute(f"SELECT count(*) FROM {alias}.mk_refused").fetchone()[0]
        except sqlite3.Error as exc:
            raise StagingError(f"staged row file {path} cannot be read ({exc}); nothing of it was committed") from None
        if len(about) != 1 or about[0][:2] != (VERSION, len(layout.field_names)):
            raise StagingError(f"staged row file {path} is not a version-{VERSION} row file of topic "
                               f"{layout.name!r} ({len(layout.field_names)} fields); nothing of it was committed")
        packed = array("q")
        packed.frombytes(about[0][2])
        if sys.byteorder != "little":
            packed.byteswap()
        self.lines = packed.tolist()  # line of seq k at [k - 1]
        # ``k``: the rows' dedup hashes, when the writer computed them (keys.row_hashes)
        self.keyed = any(col[1] == "k" for col in conn.execute(f"PRAGMA {alias}.table_info(mk_rows)"))
        self._end_line: int | None = None  # the last line the file holds, accepted or refused
        if len(self.lines) != self.rows:
            raise StagingError(f"staged row file {path} holds {self.rows} row(s) and {len(self.lines)} line "
                               "number(s); nothing of it was committed")

    def slices(self, size: int, after_line: int = 0) -> Iterator[Slice]:
        """The file's rows past line ``after_line``, in slices of at most ``size`` accepted
        rows, in line order. Each refused line belongs to the first slice whose last line is
        at or past it (lines refused after the last accepted row: the last slice; a file
        with only refused lines: one slice of no accepted rows)."""
        while (piece := self.next_slice(size, after_line)) is not None:
            yield piece
            after_line = piece.last_line

    def next_slice(self, size: int, after_line: int = 0) -> Slice | None:
        """The first slice of :meth:`slices` past line ``after_line`` (at most ``size``
        accepted rows, at least 1), or None when the file holds nothing past it."""
        lines = self.lines
        if self._end_line is None:
            most_refused = self.conn.execute(f"SELECT max(line) FROM {self.alias}.mk_refused").fetchone()[0] or 0
            self._end_line = max(lines[-1] if lines else 0, most_refused)
        end_line = self._end_line
        if after_line >= end_line:
            return None
        first = bisect_right(lines, after_line) + 1  # the first seq past after_line (lines grow with seq)
        last = min(first + max(size, 1) - 1, self.rows)
        last_line = end_line if last == self.rows else lines[last - 1]
        refused = self.conn.execute(
            f"SELECT line, error, payload FROM {self.alias}.mk_refused WHERE line > ? AND line <= ? ORDER BY line",
            (after_line, last_line)).fetchall()
        return Slice(first, last, last_line, refused)

    def values(self, piece: Slice) -> list[tuple]:
        """The storage values of the slice's accepted rows, in line order."""
        cols = _value_columns(len(self.layout.field_names)) or "NULL"
        return self.conn.execute(f"SELECT {cols} FROM {self.alias}.mk_rows WHERE seq BETWEEN ? AND ? ORDER BY seq",
                                 (piece.first, piece.last)).fetchall()

    @property
    def table(self) -> str:
        """The attached table of accepted rows (``seq``, then ``c0, c1, ...``)."""
        return f"{self.alias}.mk_rows"

    @property
    def value_columns(self) -> str:
        """``c0, c1, ...``: the columns of the accepted rows holding the topic's field values."""
        return _value_columns(len(self.layout.field_names))


@contextmanager
def attached(conn: sqlite3.Connection, path: str, layout: TopicLayout, alias: str = ALIAS) -> Iterator[RowFile]:
    """The row file at ``path`` attached to ``conn`` under ``alias`` for the block (outside a
    transaction; ``alias``: :data:`ALIAS`, or :func:`numbered_alias`).

    Raises:
        StagingError: the file is missing, not a row file, or of another topic's shape.
    """
    if alias != ALIAS and not (alias.startswith(ALIAS) and alias[len(ALIAS):].isdigit()):
        raise ValueError(f"a row file is attached as {ALIAS!r} or numbered_alias(n), not as {alias!r}")
    if conn.in_transaction:
        raise RuntimeError("a row file is attached outside a transaction (SQLite refuses ATTACH inside one)")
    if any(name == alias for _seq, name, _file in conn.execute("PRAGMA database_list")):
        conn.execute(f"DETACH DATABASE {alias}")  # left by a commit that failed before it could detach
    if not os.path.isfile(path):  # ATTACH would create an empty database in its place
        raise StagingError(f"staged row file {path} is missing; nothing of it was committed")
    try:
        conn.execute(f"ATTACH DATABASE ? AS {alias}", (path,))
    except sqlite3.Error as exc:
        raise StagingError(f"staged row file {path} cannot be opened ({exc}); nothing of it was committed") from None
    try:
        yield RowFile(conn, path, layout, alias)
    except BaseException:
        try:
            conn.execute(f"DETACH DATABASE {alias}")
        except sqlite3.Error:
            pass  # the original error matters; the next attach detaches what is left
        raise
    conn.execute(f"DETACH DATABASE {alias}")


def numbered_alias(n: int) -> str:
    """The alias of the ``n``-th of several row files attached at once (0 <= n < :data:`MAX_ATTACHED`)."""
    if not 0 <= n < MAX_ATTACHED:
        raise ValueError(f"at most {MAX_ATTACHED} row files are attached at once, not {n + 1}")
    return f"{ALIAS}{n}"

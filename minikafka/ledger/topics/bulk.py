"""Bulk writes sized by the target's dedup index, so they cost the same at any history.

Keys arrive in random order, so a write of N new rows lands on about min(N, leaves) leaves
of the topic's ``"_key"`` index (keys.py), and every leaf it touched is written again at
COMMIT (to the WAL, then by the checkpoint to the file). With a fixed number of rows per
transaction that cost per row grows with the history; with transactions that grow with the
index it stays flat:

- :func:`transaction_rows`: rows per transaction of a bulk load, at least the caller's
  batch and :data:`LEAF_ROWS` times the index's leaves (so each leaf is written once per
  that many new rows; the leaves the index will have once the load's rows are in, when
  the caller knows how many it adds), at most :data:`MAX_ROWS`;
- :func:`page_cache`: for the block, a page cache that holds the index (plus room for the
  pages being written), so no leaf is read twice or spilled mid-transaction; then the
  connection's usual cache again.

The index's size is estimated from the topic's highest id (ids are at least its rows; one
lookup, no count), so sizing costs the same at any history.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from .identifiers import quote_identifier

ENTRY_BYTES = 24  # a "_key" index entry: 8-byte hash, rowid, cell overhead, leaves ~70% full
PAGE_BYTES = 4096
# new rows per index leaf in one transaction: about 128 bytes of index writes per row. Measured
# (2M-line backfill with random keys into an empty topic, 2 cores, 2026-11-27): transactions of
# 8 rows per leaf of the final index (~100k rows) committed in 8.5 s, of 32 (~400k) in 8.0 s
LEAF_ROWS = 32
ROW_BYTES = 512  # cache room per row being written (table and index pages)
# rows per transaction at most (a crash redoes at most this many). A 1M cap stopped the growth
# at about 4M rows of history, and the backfill's rate fell with the history past it (2026-11-27)
MAX_ROWS = 4_000_000
CACHE_SHARE = 4  # the cache takes at most this share of the machine's memory (1/4)
MAX_CACHE_BYTES = 4 << 30
CACHE_KIB = 64 * 1024  # the page cache each ledger connection may grow to (connection.py sets it)


def key_index_bytes(conn: sqlite3.Connection, topic: str, adding: int = 0) -> int:
    """Estimated size of ``topic``'s ``"_key"`` index, with ``adding`` more rows (0 for a
    topic without dedup fields)."""
    dedup = conn.execute("SELECT dedup FROM _minikafka_topics WHERE name = ?", (topic,)).fetchone()
    if dedup is None or dedup[0] in ("[]", ""):
        return 0
    top = conn.execute(f'SELECT max("_id") FROM {quote_identifier(topic)}').fetchone()[0] or 0
    return (top + adding) * ENTRY_BYTES  # ids >= rows: one lookup, whatever the row marks hold


def transaction_rows(conn: sqlite3.Connection, topic: str, at_least: int, adding: int = 0) -> int:
    """Rows per transaction for a bulk load of ``adding`` rows (0: not known) into ``topic``
    (see the module docstring)."""
    leaves = key_index_bytes(conn, topic, adding) // PAGE_BYTES
    return max(at_least, min(MAX_ROWS, leaves * LEAF_ROWS))


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


@contextmanager
def page_cache(conn: sqlite3.Connection, topics: str | list[str], *, extra_bytes: int = 0) -> Iterator[int]:
    """A page cache for the block that holds the key indexes of ``topics`` and
    ``extra_bytes`` (the rows of one transaction), never less than the connection's own and
    at most a quarter of the machine's memory (4 GiB); yields its size in KiB. Pages are
    allocated only as used."""
    names = [topics] if isinstance(topics, str) else topics
    wanted = int(sum(key_index_bytes(conn, t) for t in names) * 1.25) + extra_bytes
    cap = min(MAX_CACHE_BYTES, _memory_bytes() // CACHE_SHARE)
    kib = max(CACHE_KIB, min(wanted, cap) // 1024)
    current = _cache_kib(conn)
    if kib <= current:  # the connection's cache (or an enclosing block's) is large enough already
        yield current
        return
    conn.execute(f"PRAGMA cache_size = -{int(kib)}")
    try:
        yield kib
    finally:
        conn.execute(f"PRAGMA cache_size = -{int(current)}")  # what it was: an enclosing block keeps its own


def _cache_kib(conn: sqlite3.Connection) -> int:
    """The connection's page cache limit in KiB (``cache_size`` is negative KiB, or pages)."""
    size = conn.execute("PRAGMA cache_size").fetchone()[0]
    if size < 0:
        return -size
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    return size * page // 1024

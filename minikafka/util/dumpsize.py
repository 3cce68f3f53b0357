"""How big a backfill is, known before anything starts: which engine loads it.

A JVM takes seconds to start (13-21 s were measured for a 16-row dump, 7 s for a backfill
that loaded nothing), while the Python engine checks about 50,000 rows a second in the
command's own process. ``backfill --engine auto`` (the default) loads a dump of at most
``SMALL_DUMP_ROWS`` rows in all, or one whose every file was loaded before, without Spark;
a larger one with Spark. The rows are counted, not guessed: lines of JSONL and CSV (gzip
decompressed; the count stops once past the limit) and Parquet's own row count.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

SMALL_DUMP_ROWS = 50_000  # at most this many rows in all: the Python engine (no JVM)
ENGINES = ("auto", "python", "spark")
_BLOCK = 1 << 20


def count_rows(path: str | os.PathLike, fmt: str, *, stop_after: int | None = None) -> int:
    """The rows of one dump: its lines (JSONL, CSV; a CSV header counts too, a record spanning
    lines counts each) or its Parquet row count. Counting stops once past ``stop_after``.

    A file that cannot be read counts 0 (the load itself then names the problem).
    """
    from . import dumpfiles

    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.ParquetFile(path).metadata.num_rows
        lines, last = 0, b"\n"
        with dumpfiles.open_binary(path) as fh:
            while block := fh.read(_BLOCK):
                lines += block.count(b"\n")
                last = block[-1:]
                if stop_after is not None and lines > stop_after:
                    return lines
        return lines + (last != b"\n")
    except Exception:  # noqa: BLE001 - unreadable, corrupt gzip, not Parquet: the load reports it
        return 0


def dump_rows(files: Iterable[tuple[str | os.PathLike, str]], *, stop_after: int | None = None) -> int:
    """The rows of several dumps ((path, format) each), counted until past ``stop_after``."""
    total = 0
    for path, fmt in files:
        left = None if stop_after is None else stop_after - total
        total += count_rows(path, fmt, stop_after=left)
        if stop_after is not None and total > stop_after:
            break
    return total


def all_loaded(paths: Iterable[str | os.PathLike], loaded: set[str] | frozenset[str]) -> bool:
    """Whether every file's bytes hash to one of ``loaded`` (the content hashes of the files a
    topic's backfills finished: ``ledger.consuming.loads``): nothing new to load."""
    from . import dumpfiles

    try:
        return all(dumpfiles.raw_digest(p) in loaded for p in paths)
    except Exception:  # noqa: BLE001 - unreadable: the load reports it
        return False


def choose_engine(requested: str, rows: int, *, threshold: int = SMALL_DUMP_ROWS, spark_options: bool = False,
                  nothing_new: bool = False) -> str:
    """``python`` or ``spark`` for a backfill of ``rows`` rows.

    Args:
        requested: ``--engine``: auto, python or spark.
        spark_options: --remote, --master or --staging was given (they ask for Spark).
        nothing_new: every file was loaded before (no rows to check).

    auto: Spark when asked for by its options, else Python when nothing is new or the rows
    are at most ``threshold``, else Spark.
    """
    if requested not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {requested!r}")
    if requested != "auto":
        return requested
    if spark_options:
        return "spark"
    return "python" if nothing_new or rows <= threshold else "spark"

"""A stage's lookups as DataFrames: read in the plan's snapshot, cached as Parquet across runs.

A lookup (``Stage(lookups=[...])``, ``lookups = [...]`` in a pipeline file) is a topic or keyed
table read whole and never acked: its frame holds the model's fields only (no ``_id``, no
metadata columns, so a join never collides on them), the rows its plan fixed
(``ledger.topics.lookups``: a topic's rows up to its high-water id, a table's versions current
as of it).

**The cache.** Reading a large lookup over JDBC every night costs seconds, though it mostly
has not changed. So the first read writes a Parquet copy under the staging root
(``<staging>/.lookup-cache/<ledger id>/<topic>/<high-water id>-<rows>-<layout fingerprint>``:
beside the ledger for the JDBC path, on the shared staging URI for the exchange path) and a
later run whose plan gives the same key reads that copy instead. A stage client of the warm
engine is a process of its own (``minikafka.job --remote``), so the copy lives on disk, not in
memory. A changed lookup (a row appended, a version merged, a row removed by retention, a new
layout) has another key: it is read again and the topic's older copies are removed once no run
has used them for ``KEEP_UNUSED_SECONDS`` (a concurrent run may still read one). A copy is
written to a temporary directory and renamed into place when whole, so no run reads a copy
half written. ``run.details["lookups"]`` says, per lookup, its rows, high-water id and whether
the copy was read (``cached``).
"""

from __future__ import annotations

import os
import time

from ...ledger.topics import TopicLayout, id_range_predicates, lookup_subquery
from ...util.faults import checkpoint
from ..engine import parallelism
from ..types import custom_schema, quote_back, to_model_columns
from .read import ROWS_PER_PARTITION, id_cuts, jdbc_url

CACHE_DIR = ".lookup-cache"
CACHE_FORMAT = "v1"  # bump when what a copy holds changes
KEEP_UNUSED_SECONDS = 900.0  # an older copy of a topic is removed once unused this long
CACHE = True  # False: every run reads its lookups over JDBC (tests compare the two)


def read_lookups(spark, source, plan, area, run_uri: str | None, run) -> dict:
    """{lookup: DataFrame of its model fields} for the plan's lookups; notes in ``run.details``."""
    if not plan.lookups:
        return {}
    frames, notes = {}, {}
    for name, layout in plan.lookups.items():
        bounds = plan.lookup_bounds[name]
        t0 = time.perf_counter()
        frame, cached = _read_one(spark, source, plan, layout, bounds, area, run_uri, run.run_id)
        frames[name] = frame
        notes[name] = {"rows": bounds.rows, "upto": bounds.upto, "table": bounds.table, "cached": cached,
                       "seconds": round(time.perf_counter() - t0, 3)}
    run.details["lookups"] = notes
    return frames


def cache_key(layout: TopicLayout, bounds) -> str:
    """The name of a lookup's cached copy: what makes two reads of it the same rows."""
    return f"{CACHE_FORMAT}-{bounds.upto}-{bounds.rows}-{layout.fingerprint[:16]}"


def topic_cache_uri(area, ledger_id: str | None, topic: str) -> str:
    from ..staging import join

    return join(area.uri, CACHE_DIR, ledger_id or "no-id", topic)


def _read_one(spark, source, plan, layout: TopicLayout, bounds, area, run_uri, run_id: str):
    """(frame, whether it was read from the cached copy)."""
    if not CACHE or area is None:
        return _read_ledger(spark, source, layout, bounds, area, run_uri), False
    from ..staging import join

    folder = topic_cache_uri(area, plan.ledger_id, layout.name)
    entry = join(folder, cache_key(layout, bounds))
    fs, entry_path = _fs(entry)
    if _complete(fs, entry_path):
        _touch(fs, entry_path)
        return spark.read.parquet(entry), True
    frame = _read_ledger(spark, source, layout, bounds, area, run_uri)
    tmp = join(folder, f".tmp-{run_id}")
    frame.write.mode("overwrite").parquet(tmp)
    checkpoint("lookup:copy-written")  # the copy is whole in its temporary directory, not in place yet
    _, tmp_path = _fs(tmp)
    try:
        fs.move(tmp_path, entry_path)
    except OSError:  # another run put the same copy there first: it holds the same rows
        fs.delete_dir(tmp_path)
    _prune(fs, _fs(folder)[1], os.path.basename(entry_path))
    return spark.read.parquet(entry), False


def _read_ledger(spark, source, layout: TopicLayout, bounds, area, run_uri):
    """The lookup's rows from the ledger: over JDBC, or exported by the driver (exchange)."""
    if area is not None and area.exchange:
        from .. import staging as stg

        uri = stg.join(run_uri, "lookup", layout.name)
        stg.export_topic(source.ledger.conn, layout, bounds.where, uri)
        frame = to_model_columns(stg.read_exported(spark, layout, uri), layout)
        return frame.select(*[quote_back(n) for n in layout.field_names])
    query = lookup_subquery(layout, bounds)
    reader = (spark.read.format("jdbc")
              .option("url", jdbc_url(source.path)).option("driver", "org.sqlite.JDBC")
              .option("dbtable", query)
              .option("customSchema", "`_id` BIGINT, " + custom_schema(layout, metadata=False))
              .option("fetchsize", "10000").option("open_mode", "1").option("busy_timeout", "30000"))
    n = min(2 * parallelism(spark), max(1, bounds.rows // ROWS_PER_PARTITION + 1))
    cuts = id_cuts(1, bounds.upto + 1, n) if n > 1 else []
    df = reader.jdbc(jdbc_url(source.path), query, predicates=id_range_predicates(cuts)) if cuts else reader.load()
    return to_model_columns(df.drop("_id"), layout)


def _fs(uri: str):
    from ..staging import filesystem

    return filesystem(uri)


def _complete(fs, path: str) -> bool:
    import pyarrow.fs as pafs

    return fs.get_file_info(path.rstrip("/") + "/_SUCCESS").type != pafs.FileType.NotFound


def _touch(fs, path: str) -> None:
    """Mark a copy used now (local disks), so a pruning run keeps it while runs read it."""
    import pyarrow.fs as pafs

    if isinstance(fs, pafs.LocalFileSystem):
        try:
            os.utime(path)
        except OSError:
            pass


def _prune(fs, folder: str, keep: str) -> None:
    """Remove the topic's other copies (and abandoned temporary ones) unused for
    ``KEEP_UNUSED_SECONDS``; never fails a run."""
    import pyarrow.fs as pafs

    now = time.time()
    try:
        infos = fs.get_file_info(pafs.FileSelector(folder))
    except OSError:
        return
    for info in infos:
        if info.base_name == keep or info.type != pafs.FileType.Directory:
            continue
        used = info.mtime.timestamp() if info.mtime is not None else 0.0
        if now - used >= KEEP_UNUSED_SECONDS:
            try:
                fs.delete_dir(info.path)
            except OSError:
                pass

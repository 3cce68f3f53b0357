"""A stage's lookups as DataFrames: read in the plan's snapshot, kept as Parquet and in the engine's memory.

A lookup (``Stage(lookups=[...])``, ``lookups = [...]`` in a pipeline file) is a topic or keyed
table read whole and never acked: its frame holds the model's fields only (no ``_id``, no
metadata columns, so a join never collides on them), the rows its plan fixed
(``ledger.topics.lookups``: a topic's rows up to its high-water id, a table's versions current
as of it).

**The disk copy.** Reading a large lookup over JDBC every night costs seconds, though it mostly
has not changed. So the first read writes a Parquet copy under the staging root
(``<staging>/.lookup-cache/<ledger id>/<topic>/<high-water id>-<rows>-<layout fingerprint>``:
beside the ledger for the JDBC path, on the shared staging URI for the exchange path) and a
later run whose plan gives the same key reads that copy instead. A changed lookup (a row
appended, a version merged, a row removed by retention, a new layout) has another key: it is
read again and the topic's older copies are removed once no run has used them for
``KEEP_UNUSED_SECONDS`` (a concurrent run may still read one). A copy is written to a temporary
directory and renamed into place when whole, so no run reads a copy half written.

**The copy in memory (warm engine).** Decoding a copy of a million rows still costs a night
seconds. Each stage of a warm-engine run is a Spark Connect session of its own (a client
process), but the engine's cache is its server's, shared by every session, and Spark serves
any later plan that reads the same copy from the cached rows. So on an engine the frame read
from a copy is persisted; the next run's read of the same copy (the same key, so the same
rows) finds it in memory (``storageLevel``), a changed lookup reads another copy. Before a new
copy of a topic is persisted, the topic's other copies are unpersisted, so an engine holds one
copy per lookup (two while concurrent runs of different snapshots alternate). A stage never
clears the engine's whole cache (``persisted.py``); Spark may evict a copy under memory
pressure and then reads it from disk again, an engine restarted has none: either way the rows
are those of the copy. Classic sessions (``--in-process``, spark-submit) end with their process
and only use the disk copy.

``run.details["lookups"]`` says, per lookup, its rows, high-water id and where its rows came
from (``cached``): ``"memory"`` (the engine's copy), ``"disk"`` (the Parquet copy) or ``False``
(the ledger).
"""

from __future__ import annotations

import os
import time

from ...ledger.topics import TopicLayout, id_range_predicates, lookup_subquery
from ...util.faults import checkpoint
from ..engine import is_connect, parallelism
from ..types import custom_schema, quote_back, to_model_columns
from .read import ROWS_PER_PARTITION, id_cuts, jdbc_url

CACHE_DIR = ".lookup-cache"
CACHE_FORMAT = "v1"  # bump when what a copy holds changes
KEEP_UNUSED_SECONDS = 900.0  # an older copy of a topic is removed once unused this long
CACHE = True  # False: every run reads its lookups over JDBC (tests compare the two)
MEMORY = True  # False: an engine's runs read the disk copy, none is kept in the engine's memory


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
    """(frame, where its rows come from: "memory", "disk" or False for the ledger)."""
    if not CACHE or area is None:
        return _read_ledger(spark, source, layout, bounds, area, run_uri), False
    from ..staging import join

    folder = topic_cache_uri(area, plan.ledger_id, layout.name)
    entry = join(folder, cache_key(layout, bounds))
    fs, entry_path = _fs(entry)
    if _complete(fs, entry_path):
        _touch(fs, entry_path)
        frame = spark.read.parquet(entry)
        if _in_memory(spark, frame):
            return frame, "memory"
        _hold(spark, frame, folder, os.path.basename(entry_path))
        return frame, "disk"
    frame = _read_ledger(spark, source, layout, bounds, area, run_uri)
    tmp = join(folder, f".tmp-{run_id}")
    frame.write.mode("overwrite").parquet(tmp)
    checkpoint("lookup:copy-written")  # the copy is whole in its temporary directory, not in place yet
    _, tmp_path = _fs(tmp)
    try:
        fs.move(tmp_path, entry_path)
    except OSError:  # another run put the same copy there first: it holds the same rows
        fs.delete_dir(tmp_path)
    frame = spark.read.parquet(entry)
    _hold(spark, frame, folder, os.path.basename(entry_path))  # before the disk copies it releases go
    _prune(fs, _fs(folder)[1], os.path.basename(entry_path))
    return frame, False


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


def _keeps_in_memory(spark) -> bool:
    return MEMORY and is_connect(spark)


def _in_memory(spark, frame) -> bool:
    """The engine holds ``frame``'s rows (persisted by an earlier run that read the same copy)."""
    from pyspark.storagelevel import StorageLevel

    return _keeps_in_memory(spark) and frame.storageLevel != StorageLevel.NONE


def _hold(spark, frame, folder: str, keep: str) -> None:
    """On an engine: release the topic's other copies from its memory, persist ``frame`` (filled
    by the first query that reads it, this run's)."""
    if not _keeps_in_memory(spark):
        return
    from pyspark.storagelevel import StorageLevel

    release_others(spark, folder, keep)
    frame.persist(StorageLevel.MEMORY_AND_DISK)


def release_others(spark, folder: str, keep: str) -> list[str]:
    """Unpersist the copies under ``folder`` (a topic's) other than ``keep`` from the engine's
    memory (a no-op for one not held); the names of those asked. Never fails a run."""
    import pyarrow.fs as pafs

    from ..staging import join

    fs, path = _fs(folder)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path))
    except OSError:
        return []
    released = []
    for info in infos:
        if info.base_name == keep or info.base_name.startswith(".") or info.type != pafs.FileType.Directory \
                or not _complete(fs, info.path):
            continue
        try:
            spark.read.parquet(join(folder, info.base_name)).unpersist()
            released.append(info.base_name)
        except Exception:  # noqa: BLE001 - a copy removed meanwhile: nothing of it to release
            pass
    return released


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

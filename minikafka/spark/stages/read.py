"""Read a topic as a DataFrame over JDBC: exact types, bounded by a high-watermark."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...api.source import Source
from ...errors import InvalidSettingError
from ...ledger import acks
from ...ledger.identifiers import quote_identifier
from ...ledger.layout import META_SELECT, TopicLayout
from ..types import custom_schema, to_model_columns

ROWS_PER_PARTITION = 100_000
WHICH = ("new", "handled", "all")


@dataclass(frozen=True)
class ReadBounds:
    """What a read covers: ids in (0, upto], status filter, and how many rows match."""

    topic: str
    upto: int
    lowest: int
    rows: int
    where: str
    partitions: tuple[int, ...] | None = None  # topic partitions read (None: all)
    consumer_pending: bool = False  # the rows pending for a consumer (all 'new' by definition)


def jdbc_url(path: str) -> str:
    return "jdbc:sqlite:" + os.path.abspath(path)


def read_bounds(source: Source, layout: TopicLayout, *, which: str = "new", consumer: str | None = None,
                upto: int | None = None, partitions: list[int] | None = None,
                start: str | None = None, consumer_id: int | None = None) -> ReadBounds:
    """Fix the set of rows a read returns (taken when a stage starts).

    ``partitions`` limits the read to those topic partitions. The WHERE clause only
    holds integers the ledger produced (watermark, consumer id, offsets) and the topic's
    (validated) name, never user text. ``start`` with no ``consumer``: the rows pending for a
    consumer not registered yet that would start there (a dry run of a new stage).
    ``consumer_id``: the consumer's id when the caller resolved it already (a stage's plan).

    Raises:
        PartitionOutOfRangeError: a partition the topic does not have.
    """
    if which not in WHICH:
        raise InvalidSettingError(f"which must be one of {WHICH}, got {which!r}")
    conn = source._ledger.conn
    if consumer_id is None and consumer:
        consumer_id = acks.require_consumer(conn, layout.name, consumer)
    table = quote_identifier(layout.name)
    if upto is None:
        upto = conn.execute(f'SELECT max("_id") FROM {table}').fetchone()[0] or 0
    upto = int(upto)
    parts = None if partitions is None else tuple(sorted({layout.check_partition(p) for p in partitions}))
    if which == "new" and consumer_id is None and start is not None:
        cond = acks.pending_sql_for_new(conn, layout.name, start, parts)
    elif which == "new":
        cond = acks.pending_sql(conn, layout.name, consumer_id, parts)
    elif which == "handled":
        cond = acks.done_sql(conn, layout.name, consumer_id, parts)
    else:
        cond = "1" if parts is None else f'"_partition" IN ({", ".join(str(p) for p in parts)})'
    lowest, rows = conn.execute(
        f'SELECT min("_id"), count(*) FROM {table} WHERE {cond} AND "_id" <= ?', (upto,)
    ).fetchone()
    return ReadBounds(layout.name, upto, int(lowest or 0), int(rows), f'{cond} AND "_id" <= {upto}', parts,
                      consumer_pending=which == "new" and consumer_id is not None)


def read_topic(spark, source: Source, topic: str | TopicLayout, *, which: str = "new",
               consumer: str | None = None, upto: int | None = None, bounds: ReadBounds | None = None,
               partitions: int | None = None, topic_partitions: list[int] | None = None):
    """The topic's rows as a DataFrame with model types and metadata columns.

    Args:
        spark: the SparkSession (from ``build_session``).
        source: the open Source of the ledger file (not ":memory:": the JVM reads the file).
        topic: a topic name or layout.
        which: "new" (pending for ``consumer``), "handled", or "all".
        consumer: a registered consumer name; None for the topic-wide status.
        upto: the high-watermark; rows with larger ids are not read (default: now).
        bounds: a ReadBounds taken earlier (overrides which/consumer/upto).
        partitions: JDBC partitions (default: one per 250,000 rows, at most 2x cores; a
            topic with several partitions is read one Spark partition per topic partition).
        topic_partitions: read only these topic partitions (default: all).

    Raises:
        TopicNotFoundError, ConsumerNotFoundError: unknown topic or consumer.
    """
    if source.path == ":memory:":
        raise InvalidSettingError("Spark reads the ledger file over JDBC: use a file Source, not ':memory:'")
    layout = topic if isinstance(topic, TopicLayout) else source.layout(topic)
    if bounds is None:
        bounds = read_bounds(source, layout, which=which, consumer=consumer, upto=upto, partitions=topic_partitions)
    fields = ", ".join(quote_identifier(n) for n in layout.field_names)
    parts = list(bounds.partitions) if bounds.partitions is not None else list(range(layout.partitions))
    by_partition = partitions is None and len(parts) > 1 and bounds.rows > 1
    # rows pending for a consumer are 'new' and not handled by definition (no per-row lookup);
    # any other read computes each row's status from positions and acks, as everywhere else
    meta = META_SELECT if bounds.consumer_pending else layout.meta_select()
    extra = ', "_partition"' if by_partition else ""
    query = f"(SELECT {meta}, {fields}{extra} FROM {quote_identifier(layout.name)} WHERE {bounds.where}) AS q"
    reader = (
        spark.read.format("jdbc")
        .option("url", jdbc_url(source.path))
        .option("driver", "org.sqlite.JDBC")
        .option("dbtable", query)
        .option("customSchema", custom_schema(layout))
        .option("fetchsize", "10000")
        .option("open_mode", "1")  # SQLITE_OPEN_READONLY: a read never takes a write lock
        .option("busy_timeout", "30000")
    )
    if by_partition:  # partition-parallel: one Spark partition per topic partition
        df = reader.jdbc(jdbc_url(source.path), query, predicates=[f'"_partition" = {int(p)}' for p in parts])
        return to_model_columns(df.drop("_partition"), layout)
    cores = spark.sparkContext.defaultParallelism
    n = partitions or min(2 * cores, max(1, bounds.rows // ROWS_PER_PARTITION + 1))
    if n > 1 and bounds.rows > 1:
        reader = (reader.option("partitionColumn", "_id").option("lowerBound", str(bounds.lowest))
                  .option("upperBound", str(bounds.upto + 1)).option("numPartitions", str(n)))
    return to_model_columns(reader.load(), layout)


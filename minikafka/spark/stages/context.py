"""A stage's context: what a transform may know and read beyond its input frames.

A transform that takes a second positional parameter gets a ``StageContext`` there::

    def transform(df, ctx):
        airlines = ctx.read("airlines")                 # every row committed before the run
        return df.join(airlines, "carrier", "left").withColumn("night", F.lit(ctx.logical_date))

It is the same on every engine (``run --in-process``, a client of the warm engine,
spark-submit) and in chunked stages. ``ctx.read`` and ``ctx.read_groups`` read the ledger the
stage runs on (never a path parsed from ``sys.argv``) as of the plan's snapshot: the
high-water id of every topic and table, taken in the one transaction that fixed the stage's
inputs (``plan.py``, ``ledger.topics.asof``), so rows committed while the stage runs are not
seen, and two reads of one run agree.

Reads go through Spark's JDBC source (or, when the stage exchanges data through a staging
URI, an export of the same rows), in storage form first: filters on int, str, bool and enum
columns (and ``_id``) given to ``.where()`` are pushed down to SQLite; date, datetime and
decimal columns are converted from their stored text after the read, so filters on them run
in Spark. ``read_groups`` pushes its own filters on the stored form, so it narrows the read on
those columns too.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import date
from typing import Any

from ...api.source import Source
from ...errors import InvalidSettingError, TopicNotFoundError
from ...ledger.topics import TopicLayout, asof, id_range_predicates
from ..engine import parallelism
from ..types import custom_schema, quote_back, to_model_columns, to_storage_column
from .read import ROWS_PER_PARTITION, id_cuts, jdbc_url

GROUP_LIMIT = 10_000  # distinct groups read_groups turns into pushed IN-lists; above it, a semi-join alone
PUSHED_KINDS = ("int", "str", "bool", "date", "datetime", "enum")  # stored forms that compare exactly


def takes_context(fn: Callable[..., Any] | None) -> bool:
    """Whether ``fn`` takes a second positional parameter (the context): ``def f(df, ctx)``,
    ``lambda df, ctx: ...``, ``def f(df, *rest)``. A one-parameter function is called as before."""
    if fn is None:
        return False
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: called with the frames alone
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or (len(positional) == 1 and any(p.kind == p.VAR_POSITIONAL for p in params))


class StageContext:
    """What a transform ``transform(df_or_frames, ctx)`` gets beside its frames.

    Attributes:
        run_id: the stage run's id (its row in the run log).
        stage: the stage's name.
        pipeline: the pipeline's name (None for a stage run outside a pipeline).
        logical_date: the night the run stands for (``run --logical-date``; default the
            run's UTC start date), a ``datetime.date``.
        spark: the SparkSession the stage runs on.
        snapshot: {topic: high-water id} of every topic and keyed table, taken with the
            stage's plan; ``read`` never returns a row above it.
    """

    def __init__(self, *, run_id: str, stage: str, pipeline: str | None, logical_date: date, spark: Any,
                 snapshot: Mapping[str, int], source: Source, area: Any = None, run_uri: str | None = None,
                 lookups: Mapping[str, Any] | None = None, partitions: int | None = None):
        self.run_id, self.stage, self.pipeline, self.logical_date = run_id, stage, pipeline, logical_date
        self.spark = spark
        self.snapshot = dict(snapshot)
        self._source, self._area, self._run_uri = source, area, run_uri
        self._lookups = dict(lookups or {})
        self._partitions = partitions

    def __repr__(self) -> str:
        return (f"StageContext(run_id={self.run_id!r}, stage={self.stage!r}, pipeline={self.pipeline!r}, "
                f"logical_date={self.logical_date.isoformat()!r}, topics={len(self.snapshot)})")

    def lookup(self, name: str):
        """The frame of the stage's lookup ``name`` (the same frame as ``frames[name]``).

        Raises:
            InvalidSettingError: ``name`` is not one of the stage's lookups.
        """
        if name not in self._lookups:
            raise InvalidSettingError(f"stage {self.stage!r} has no lookup {name!r} (its lookups: "
                                      f"{sorted(self._lookups)!r}); ctx.read({name!r}) reads any topic or table")
        return self._lookups[name]

    def read(self, name: str, which: str | None = None):
        """Every row of topic or table ``name`` up to the snapshot: the model's fields and ``_id``.

        Args:
            which: "all" (every row; a table's every version) or "current" (a keyed table's
                rows current as of the snapshot). Default: "current" for a table, "all" for a topic.

        Raises:
            TopicNotFoundError: no such topic in the ledger when the stage was planned.
            InvalidSettingError: an unknown ``which``, or "current" of a plain topic.
        """
        layout, which = self._layout(name), self._which(name, which)
        return to_model_columns(self._stored(layout, which), layout)

    def read_groups(self, name: str, frame, by: str | Iterable[str], which: str | None = None):
        """The rows of ``name`` (as :meth:`read` gives them) whose ``by`` columns equal those of
        a row of ``frame``: exactly those, nulls matching nulls as ``groupBy`` groups them.

        The distinct groups of ``frame`` are collected (up to ``GROUP_LIMIT``) and each ``by``
        column of a type stored exactly (int, str, bool, enum, date, datetime) becomes an
        IN-list pushed down to SQLite; then a semi-join against the groups keeps exactly the
        rows of a group (an IN-list per column lets through combinations no row of ``frame``
        has). With more groups than the limit, the semi-join alone (the whole table up to the
        snapshot is read). ``frame`` is evaluated twice: persist it if it is costly.

        Raises:
            TopicNotFoundError, InvalidSettingError: as :meth:`read`; a ``by`` column that
                ``name`` or ``frame`` lacks.
        """
        from pyspark.sql import functions as F

        layout, which = self._layout(name), self._which(name, which)
        by = [by] if isinstance(by, str) else list(by)
        if not by:
            raise InvalidSettingError("read_groups: by must name at least one column")
        for column in by:
            if column not in layout.field_names:
                raise InvalidSettingError(f"read_groups: {column!r} is not a field of {name!r} "
                                          f"(fields: {layout.field_names!r})")
            if column not in frame.columns:
                raise InvalidSettingError(f"read_groups: the frame has no column {column!r} (columns: {frame.columns!r})")
        tag = uuid.uuid4().hex[:8]
        keys = [f"_mk_group_{tag}_{i}" for i in range(len(by))]
        groups = frame.select(*[F.col(quote_back(c)).alias(k) for c, k in zip(by, keys)]).distinct()
        stored = self._stored(layout, which)
        pushed = [(i, c) for i, c in enumerate(by) if layout.column(c).kind in PUSHED_KINDS]
        few = False
        if pushed:
            forms = groups.select(*[to_storage_column(layout.column(by[i]), F.col(keys[i])).alias(keys[i])
                                    for i, _c in pushed]).limit(GROUP_LIMIT + 1).collect()
            few = len(forms) <= GROUP_LIMIT
            if few:
                for j, (_i, column) in enumerate(pushed):
                    values = {row[j] for row in forms}
                    known = sorted(v for v in values if v is not None)
                    cond = F.col(quote_back(column)).isin(known) if known else F.lit(False)
                    if None in values:
                        cond = cond | F.col(quote_back(column)).isNull()
                    stored = stored.where(cond)
        rows = to_model_columns(stored, layout)
        on = [F.col(quote_back(c)).eqNullSafe(F.col(k)) for c, k in zip(by, keys)]
        return rows.join(F.broadcast(groups) if few else groups, on, "left_semi")

    # -- reading -----------------------------------------------------------------------
    def _layout(self, name: str) -> TopicLayout:
        if name not in self.snapshot:
            raise TopicNotFoundError(f"no topic {name!r} in the ledger when stage {self.stage!r} was planned "
                                     f"(topics: {sorted(self.snapshot)!r})")
        return self._source.layout(name)

    def _which(self, name: str, which: str | None) -> str:
        return which if which is not None else asof.default_which(self._source.ledger.conn, name)

    def _stored(self, layout: TopicLayout, which: str):
        """The rows of a read as of the snapshot, ``_id`` and fields in storage form."""
        conn, upto = self._source.ledger.conn, self.snapshot[layout.name]
        if self._area is not None and self._area.exchange:
            return self._exported(layout, asof.where(conn, layout, upto, which), which)
        url = jdbc_url(self._source.path)
        query = asof.subquery(conn, layout, upto, which)
        reader = (self.spark.read.format("jdbc").option("url", url).option("driver", "org.sqlite.JDBC")
                  .option("dbtable", query)
                  .option("customSchema", "`_id` BIGINT, " + custom_schema(layout, metadata=False))
                  .option("fetchsize", "10000")
                  .option("open_mode", "1")  # SQLITE_OPEN_READONLY: a read never takes a write lock
                  .option("busy_timeout", "30000"))
        n = self._partitions or min(2 * parallelism(self.spark), upto // ROWS_PER_PARTITION + 1)
        if n > 1 and upto > 1:
            return reader.jdbc(url, query, predicates=id_range_predicates(id_cuts(1, upto + 1, n)))
        return reader.load()

    def _exported(self, layout: TopicLayout, where: str, which: str):
        """As the JDBC read, through the staging URI every node sees (executors never open the ledger)."""
        from .. import staging as stg

        uri = stg.join(self._run_uri, "ctx", f"{layout.name}-{which}-{uuid.uuid4().hex[:8]}")
        stg.export_topic(self._source.ledger.conn, layout, where, uri)
        return stg.read_exported(self.spark, layout, uri).select("_id", *[quote_back(n) for n in layout.field_names])

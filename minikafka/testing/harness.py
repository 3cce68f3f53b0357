"""``StageHarness``: a pipeline file on a temporary ledger, rows fed into topics, one stage run
through the real stage code (its expectation suites included) on a classic session or an engine.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..api.source import Source
from ..api.topic import Topic
from ..errors import InvalidSettingError
from ..ledger.consuming import list_quarantined
from ..pipelines.definition import PipelineDefinition, load_pipeline
from ..pipelines.opening import open_source, run_row
from ..util.optional import require

ENGINES = ("classic", "connect")
CONNECT_ENV = "SPARK_CONNECT_MODE_ENABLED"  # pyspark's functions build Connect columns while it is set
META = "_id"


@dataclass
class StageResult:
    """What one run of a stage did: the rows it wrote to each output (``outputs``, model fields
    in id order), the rows it set aside (``quarantined``, each with its ``reason``), its run log
    row (``run``) and the session it ran on (``spark``)."""

    stage: str
    outputs: dict[str, list[dict[str, Any]]]
    quarantined: list[dict[str, Any]]
    run: dict[str, Any]
    spark: Any = field(default=None, repr=False)
    first_ids: dict[str, int] = field(default_factory=dict, repr=False)  # {output: the first id the run may write}
    columns: dict[str, list[str]] = field(default_factory=dict, repr=False)  # {output: its model's fields}
    source: Source | None = field(default=None, repr=False)

    @property
    def status(self) -> str:
        return self.run["status"]

    def frame(self, topic: str):
        """The rows the run wrote to ``topic`` as a Spark DataFrame (model columns, exact types)."""
        if topic not in self.outputs:
            raise InvalidSettingError(f"stage {self.stage!r} has no output {topic!r} (outputs: {sorted(self.outputs)})")
        from ..spark.engine import is_connect

        with _connect_mode(is_connect(self.spark)):
            return self._frame(topic)

    def _frame(self, topic: str):
        from pyspark.sql import functions as F

        assert self.source is not None
        df = self.source.opened(topic).to_spark(self.spark)
        return df.where(F.col(META) >= F.lit(self.first_ids[topic])).orderBy(META).select(*self.columns[topic])


class StageHarness:
    """A pipeline file loaded onto the ledger at ``ledger`` (its ``source`` redirected there), every
    declared topic and table created and every stage's consumer registered.

    ``sessions`` gives the Spark session of an engine by name (``"classic"`` or ``"connect"``);
    the pytest plugin passes its fixtures' sessions.
    """

    def __init__(self, pipeline: str | Path, ledger: str | Path, sessions: Callable[[str, PipelineDefinition], Any]):
        _working_directory_on_path()
        self.definition = load_pipeline(pipeline)
        self.definition.source = Path(ledger).resolve()
        self.source: Source = open_source(self.definition)
        self._sessions = sessions
        self.last: StageResult | None = None

    def close(self) -> None:
        self.source.close()

    def __enter__(self) -> StageHarness:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- rows in ---------------------------------------------------------------------------
    def topic(self, name: str) -> Topic:
        """The declared topic (or table) ``name``, open on the temporary ledger."""
        handle = self.source.opened(name)
        if handle is None:
            raise InvalidSettingError(f"{self.definition.path}: no topic {name!r} is declared "
                                      f"(topics: {sorted(self.definition.topics)})")
        return handle

    def feed(self, topic: str, rows: Iterable[BaseModel | dict[str, Any]]) -> int:
        """Append ``rows`` (models or dicts) to ``topic`` through the normal API (validated, deduped);
        return how many were stored."""
        handle = self.topic(topic)
        before = handle.high_watermark()
        handle.extend(list(rows))
        handle.flush()
        return sum(1 for _ in _since(handle, before))

    # -- a stage run -----------------------------------------------------------------------
    def run_stage(self, name: str, engine: str = "classic", *, logical_date: date | str | None = None) -> StageResult:
        """Run the stage ``name`` as ``minikafka run`` does (its suites, its commit) on ``engine``.

        Raises:
            StageFailed: the stage failed (its message says why); nothing was committed.
            InvalidSettingError: ``engine`` is neither ``"classic"`` nor ``"connect"``.
            PipelineDefinitionError: no stage ``name`` in the pipeline file.
        """
        from ..pipelines.launch.inprocess import build_stage
        from ..spark.stages.stage import run_stage

        if engine not in ENGINES:
            raise InvalidSettingError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        sd = self.definition.stage(name)
        stage = build_stage(self.definition, sd)
        first_ids = {t: self.topic(t).high_watermark() + 1 for t in sd.outputs}
        with _connect_mode(False):  # a classic session is never built in Connect mode (connect() sets it)
            spark = self._sessions(engine, self.definition)
        with _connect_mode(engine == "connect"):
            for key, value in sd.spark.items():
                if key.startswith("spark.sql."):
                    spark.conf.set(key, value)
            run = run_stage(spark, self.source, stage, pipeline=self.definition.name, logical_date=logical_date)
        outputs = {t: [r.data.model_dump() for r in _since(self.topic(t), first_ids[t] - 1)] for t in sd.outputs}
        quarantined = [q for q in list_quarantined(self.source.ledger.conn, limit=None, oldest_first=True)
                       if q["run_id"] == run.run_id]
        self.last = StageResult(name, outputs, quarantined, run_row(self.source, run.run_id) or run.as_row(),
                                spark=spark, first_ids=first_ids, source=self.source,
                                columns={t: list(self.definition.topics[t].model.model_fields) for t in sd.outputs})
        return self.last

    def assert_output_equals(self, topic: str, expected, *, result: StageResult | None = None,
                             ignore_row_order: bool = True, **chispa_options: Any) -> None:
        """The rows the last run (or ``result``) wrote to ``topic`` equal ``expected``: a Spark
        DataFrame, or rows (models or dicts) made into one with the output's schema; compared by
        chispa's ``assert_df_equality`` (row order ignored unless ``ignore_row_order=False``).

        Raises:
            AssertionError: the frames differ (chispa's table of the rows or schemas that do).
            MissingDependencyError: chispa is not installed (the ``testing`` extra).
        """
        require("chispa", "testing")
        result = result or self.last
        if result is None:
            raise InvalidSettingError("no stage has run yet: call run_stage() first")
        from ..spark.engine import is_connect

        with _connect_mode(is_connect(result.spark)):
            self._assert_frames_equal(result, topic, expected, ignore_row_order, chispa_options)

    @staticmethod
    def _assert_frames_equal(result: StageResult, topic: str, expected, ignore_row_order: bool,
                             chispa_options: dict[str, Any]) -> None:
        from chispa import assert_df_equality

        actual = result._frame(topic)
        if not hasattr(expected, "schema"):
            rows = [r.model_dump() if isinstance(r, BaseModel) else dict(r) for r in expected]
            expected = result.spark.createDataFrame([tuple(r.get(c) for c in actual.columns) for r in rows],
                                                    schema=actual.schema)
        chispa_options.setdefault("ignore_nullable", True)
        chispa_options.setdefault("ignore_column_order", True)
        try:
            assert_df_equality(actual, expected, ignore_row_order=ignore_row_order, **chispa_options)
        except Exception as exc:  # chispa's DataFramesNotEqualError / SchemasNotEqualError: a test's failure
            if type(exc).__module__.startswith("chispa"):
                raise AssertionError(f"the rows stage {result.stage!r} wrote to {topic!r} differ from the expected "
                                     f"ones:{exc}") from None
            raise


def _since(handle: Topic, offset: int) -> Iterator:
    while True:
        page = handle.read_since(offset, limit=10_000)
        if not page:
            return
        yield from page
        offset = page[-1].id


@contextmanager
def _connect_mode(on: bool):
    """pyspark's functions build Connect columns only while ``SPARK_CONNECT_MODE_ENABLED`` is set:
    set for an engine's run, unset for a classic one, as it was afterwards."""
    before = os.environ.get(CONNECT_ENV)
    if on:
        os.environ[CONNECT_ENV] = "1"
    else:
        os.environ.pop(CONNECT_ENV, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONNECT_ENV, None)
        else:
            os.environ[CONNECT_ENV] = before


def _working_directory_on_path() -> None:
    """A project's ``jobs.*`` and ``schemas.*`` import from the working directory, as with the CLI
    (after the installed packages: a local file never shadows an installed one)."""
    import sys

    cwd = os.getcwd()
    if not any(os.path.abspath(p or os.curdir) == cwd for p in sys.path):
        sys.path.append(cwd)


def temporary_code_zip(defn: PipelineDefinition, scratch: str | None = None) -> str:
    """The project's jobs and models zipped for an engine's Python workers."""
    from ..pipelines.launch.code import code_zip

    return str(code_zip(defn, scratch or tempfile.mkdtemp(prefix="minikafka-harness-")))

"""A stage run in this process: on a Spark session of its own or of the engine, or with no JVM.

``run_in_process`` is also the empty run: with ``spark`` None a stage with nothing to read
records its run (0 rows) without starting a JVM. ``InProcessLauncher`` is ``run --in-process``
(every stage in one Spark application, or one client session of the engine) and the session
``watch`` keeps.
"""

from __future__ import annotations

import copy
import time
from datetime import date

from ...api.source import Source
from ...errors import MinikafkaError, StageRunningError, StagingError
from ...ledger.consuming import new_run_id
from ..definition import PipelineDefinition, StageDefinition
from ..failures import record_failed_run
from ..opening import open_source, run_row, stage_ids
from ..results import StageOutcome


def build_stage(defn: PipelineDefinition, sd: StageDefinition, *, suites: bool = True):
    """The stage to run (``suites=False``: without its expectation suites, for a run with no rows)."""
    from ...spark.stages.stage import Stage

    module = sd.job_module()
    if suites:
        sd.load_suites()
    return Stage(sd.name, sd.inputs, sd.outputs, transform=getattr(module, "transform", None),
                 row_fn=getattr(module, "row_fn", None), consumer=sd.consumer, strategy=sd.strategy,
                 max_attempts=sd.max_attempts, partitions=sd.partitions, topic_partitions=sd.topic_partitions,
                 suites=[copy.copy(suite) for suite in sd.suites] if suites else [], start=sd.start,
                 lookups=list(sd.lookups))


def run_in_process(spark, defn: PipelineDefinition, sd: StageDefinition, dry_run: bool,
                   staging: str | None = None, upto: dict[str, int] | None = None,
                   run_id: str | None = None, source: Source | None = None,
                   consumer_ids: dict[str, int] | None = None, logical_date: date | None = None) -> StageOutcome:
    """Run one stage in this process (``spark`` None: a run with no rows, no JVM), on
    ``source`` (the runner's, every topic open and ``consumer_ids`` registered) or on the
    ledger opened for it; ``logical_date``: the run's (None: today in UTC)."""
    if source is not None:
        return _run_on(spark, source, defn, sd, dry_run, staging, upto, run_id, consumer_ids, logical_date)
    with open_source(defn, register=not dry_run) as opened:
        return _run_on(spark, opened, defn, sd, dry_run, staging, upto, run_id, None, logical_date)


def _run_on(spark, source: Source, defn: PipelineDefinition, sd: StageDefinition, dry_run: bool,
            staging: str | None, upto: dict[str, int] | None, run_id: str | None,
            consumer_ids: dict[str, int] | None, logical_date: date | None) -> StageOutcome:
    from ...spark.stages.stage import StageFailed, run_stage

    t0 = time.perf_counter()
    for key, value in sd.spark.items():
        if spark is not None and key.startswith("spark.sql."):
            spark.conf.set(key, value)
    try:
        if sd.window_rows:  # a backlog in chunks of N input rows, one commit each
            from ...spark.stages.chunks import combine, run_stage_in_chunks

            row = combine(run_stage_in_chunks(spark, source, build_stage(defn, sd), sd.window_rows,
                                              run_id=run_id, dry_run=dry_run, upto=upto, staging=staging,
                                              pipeline=defn.name, logical_date=logical_date))
            return StageOutcome(sd.name, row["status"], time.perf_counter() - t0, row)
        run = run_stage(spark, source, build_stage(defn, sd, suites=spark is not None), dry_run=dry_run,
                        upto=upto, staging=staging, run_id=run_id, consumer_ids=consumer_ids, pipeline=defn.name,
                        logical_date=logical_date)
    except StageFailed as exc:
        return StageOutcome(sd.name, "failed", time.perf_counter() - t0, run_row(source, exc.run_id), str(exc))
    except (StageRunningError, StagingError) as exc:
        row = None if dry_run else record_failed_run(defn, run_id or new_run_id(sd.name), str(exc), sd,
                                                     details={"phase": "start"})
        return StageOutcome(sd.name, "failed", time.perf_counter() - t0, row, str(exc))
    row = run_row(source, run.run_id) or run.as_row()
    return StageOutcome(sd.name, run.status, time.perf_counter() - t0, row)


def start_session(defn: PipelineDefinition, sd: StageDefinition, master: str, py_files: str | None,
                  dry_run: bool, url: str | None = None, run_id: str | None = None):
    """(SparkSession, None), or (None, the failed outcome, recorded) when the JVM does not start
    (``url``: a client session of that engine, the code shipped to it)."""
    from ...spark.session import build_session

    t0 = time.perf_counter()
    try:
        if url is not None:
            from .engine import engine_session

            return engine_session(defn, url, py_files), None
        spark = build_session(f"minikafka:{defn.name}", master, conf=defn.spark)
    except MinikafkaError as exc:  # SparkSetupError: no Java, no JDBC jar, the JVM did not start
        error = f"the Spark application did not start: {exc}"
        row = None if dry_run else record_failed_run(defn, run_id or new_run_id(sd.name), error, sd,
                                                     details={"phase": "session"})
        return None, StageOutcome(sd.name, "failed", time.perf_counter() - t0, row, error)
    if py_files:
        spark.addArtifacts(py_files, pyfile=True)
    return spark, None


def watch_session(defn: PipelineDefinition, master: str, remote: str | None):
    """``watch``'s one Spark session: a client session of the engine ``remote`` names (the
    project's code shipped to it), else an application of its own on ``master``.

    Raises:
        MasterUnreachableError: nothing answers at a spark:// master (before the JVM starts).
        EngineError: no engine answers at ``remote``.
    """
    if remote:
        import tempfile

        from .code import code_zip
        from .engine import engine_session, named_engine

        with tempfile.TemporaryDirectory(prefix="minikafka-watch-") as scratch:
            return engine_session(defn, named_engine(defn, remote), str(code_zip(defn, scratch)))
    from ...spark.session import build_session, check_master

    check_master(master)  # an unreachable spark:// master is named before the JVM starts
    return build_session(f"minikafka:{defn.name}:watch", master, conf=defn.spark)


class InProcessLauncher:
    """``run --in-process``: every stage in this process, in one Spark application started at
    the first stage with rows (or one client session of the engine at ``url``), on the
    scheduler's ``source`` with the consumer ids it ``registered``."""

    width = 1

    def __init__(self, defn: PipelineDefinition, *, source: Source, registered: dict[tuple[str, str], int],
                 master: str, staging: str | None, dry_run: bool, url: str | None, py_files: str | None,
                 logical_date: date | None = None):
        self.defn, self.source, self.registered = defn, source, registered
        self.master, self.staging, self.dry_run, self.url, self.py_files = master, staging, dry_run, url, py_files
        self.logical_date = logical_date
        self.spark = None

    def launch(self, sd: StageDefinition, run_id: str, procs=None, *, pending: int | None = None) -> StageOutcome:
        if self.spark is None:
            self.spark, failed = start_session(self.defn, sd, self.master, self.py_files, self.dry_run, self.url,
                                               run_id)
            if failed is not None:
                return failed
        return run_in_process(self.spark, self.defn, sd, self.dry_run, self.staging, run_id=run_id,
                              source=self.source, consumer_ids=stage_ids(self.registered, sd),
                              logical_date=self.logical_date)

    def starting(self, sd: StageDefinition) -> None:
        """Nothing to warm: the stage runs on this process's session."""

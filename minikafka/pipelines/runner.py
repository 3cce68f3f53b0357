"""Run a pipeline's stages in DAG order: one spark-submit per stage, or all in one app."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..api.source import Source
from ..errors import MinikafkaError
from ..ledger.consuming import (
    INTERRUPTED,
    RunResult,
    decoded,
    insert_run_unless_present_in_current_transaction,
    interruption,
    new_run_id,
    read_runs,
    write_run_in_current_transaction,
)
from ..util.procs import child_env as submit_env  # noqa: F401  (the stages' environment)
from ..util.progress import heartbeat
from ..util.redact import redact_and_cut, redact_url
from ..util.results import Result
from .definition import PipelineDefinition, PipelineDefinitionError, StageDefinition

log = logging.getLogger("minikafka.pipelines")

STRATEGIES = ("strict", "best_effort")
HEARTBEAT_S = float(os.environ.get("MINIKAFKA_HEARTBEAT_S", "15"))


@dataclass
class StageOutcome(Result):
    """What happened to one stage in a pipeline run."""

    name: str
    status: str  # succeeded | partial | failed | skipped
    seconds: float = 0.0
    run: dict | None = None
    error: str | None = None
    quarantined_to: list[str] = field(default_factory=list)  # set when every row went to the quarantine

    def summary(self) -> str:
        rows = (self.run or {}).get("rows_out")
        told = f", {rows:,} row(s) out" if isinstance(rows, int) else ""
        return f"stage {self.name}: {self.status}{told}, {self.seconds:.1f} s" + (f": {self.error}" if self.error else "")

    @property
    def quality(self) -> dict:
        """The run's quality results ({suites: [...], report: path}); {} without suites."""
        return _parsed((self.run or {}).get("quality")) or {}

    def failed_checks(self) -> list[tuple[dict, dict]]:
        """(suite, result) of every expectation that failed in this stage's run."""
        return [(suite, r) for suite in self.quality.get("suites", []) for r in suite.get("results", [])
                if not r.get("success")]

    def as_dict(self) -> dict:
        """The stage's entry in ``run --json`` (keys documented in the command's help)."""
        r = self.run or {}
        return {
            "stage": self.name, "status": self.status, "run_id": r.get("run_id"), "seconds": round(self.seconds, 3),
            **{k: r.get(k, 0) or 0 for k in ROW_COUNTS}, "error": self.error, "quarantined_to": self.quarantined_to,
            "report": self.quality.get("report"),
            "failed_expectations": [
                {"suite": suite["suite"], "policy": suite["policy"], "expectation": res["expectation"],
                 "column": res.get("column"), "unexpected_count": res.get("unexpected_count"),
                 "unexpected_percent": res.get("unexpected_percent"), "observed_value": res.get("observed_value"),
                 "unexpected_sample": res.get("unexpected_sample", [])}
                for suite, res in self.failed_checks()],
        }


ROW_COUNTS = ("rows_in", "rows_out", "rows_duplicate", "rows_quarantined", "rows_failed")
DRY_RUN_NOTE = "dry run: nothing was written (the counts are what 'run' would do now)"


def _parsed(value):
    """A run-log JSON column as a value (rows read back are parsed; a dry run's row is text)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


@dataclass
class PipelineRun(Result):
    pipeline: str
    outcomes: list[StageOutcome] = field(default_factory=list)
    seconds: float = 0.0
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return all(o.status in ("succeeded", "partial") for o in self.outcomes)

    @property
    def failed(self) -> list[StageOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def nothing_to_do(self) -> bool:
        """No selected stage had a row to read (every run was empty)."""
        return self.ok and not any((o.run or {}).get("rows_in") for o in self.outcomes)

    def as_dict(self) -> dict:
        """``run --json``: {pipeline, ok, dry_run, nothing_to_do, seconds, stages: [...]}."""
        return {"pipeline": self.pipeline, "ok": self.ok, "dry_run": self.dry_run,
                "nothing_to_do": self.nothing_to_do, "seconds": round(self.seconds, 3),
                "stages": [o.as_dict() for o in self.outcomes]}

    def summary(self) -> str:
        return (f"pipeline {self.pipeline}: {len(self.outcomes)} stage(s), {len(self.failed)} failed, "
                f"{self.seconds:.1f} s" + (" (dry run)" if self.dry_run else ""))

    def warnings(self) -> list[str]:
        """Lines naming every failed expectation of a stage that did not fail (policy warn or
        quarantine), with how many rows and a sample, and the report's path."""
        from ..quality.report import describe

        lines = []
        for o in self.outcomes:
            if o.status == "failed":
                continue
            for suite in o.quality.get("suites", []):
                bad = [r for r in suite.get("results", []) if not r.get("success")]
                if not bad:
                    continue
                fate = {"warn": "the rows were committed anyway",
                        "quarantine": f"{suite.get('quarantined_rows', 0)} row(s) set aside in the quarantine"}
                lines.append(f"WARNING {o.name}: suite {suite['suite']} ({suite['policy']}): {len(bad)} of "
                             f"{len(suite['results'])} expectation(s) failed; "
                             f"{fate.get(suite['policy'], 'see the report')}")
                for r in bad:
                    lines.append(f"    {r['expectation']}({r.get('column') or ''}) {describe(r)}")
            if o.failed_checks() and o.quality.get("report"):
                lines.append(f"    report: {o.quality['report']}")
        return lines

    def table(self) -> str:
        lines = [DRY_RUN_NOTE] if self.dry_run else []
        lines.append(f"{'stage':22} {'status':10} {'in':>9} {'out':>9} {'dup':>7} {'quar':>6} {'fail':>6} {'time':>8}")
        for o in self.outcomes:
            r = o.run or {}
            lines.append(
                f"{o.name[:22]:22} {o.status:10} {r.get('rows_in', 0):>9} {r.get('rows_out', 0):>9} "
                f"{r.get('rows_duplicate', 0):>7} {r.get('rows_quarantined', 0):>6} {r.get('rows_failed', 0):>6} "
                f"{o.seconds:>7.1f}s"
            )
        for o in self.outcomes:
            if o.quarantined_to:
                lines.append(f"QUARANTINED {o.name}: every row it produced went to the quarantine "
                             f"({(o.run or {}).get('rows_quarantined', 0)}), nothing was "
                             f"{'to be ' if self.dry_run else ''}committed: minikafka quarantine {o.quarantined_to[0]}")
        lines += self.warnings()
        for o in self.failed:
            lines.append(f"FAILED {o.name}: {redact_and_cut(o.error, 1500)}")
            if o.quality.get("report"):
                lines.append(f"    report: {o.quality['report']}")
        verdict = "ok" if self.ok else f"{len(self.failed)} stage(s) failed"
        if self.nothing_to_do:
            verdict += ", nothing to do: no stage had new rows"
        lines.append(f"total {self.seconds:.1f}s: {verdict}" + (" (dry run: nothing was written)" if self.dry_run else ""))
        return "\n".join(lines)


def open_source(defn: PipelineDefinition, *, create: bool = True, register: bool = True,
                notes: list[str] | None = None, registered: dict[tuple[str, str], int] | None = None,
                topics: list[str] | None = None) -> Source:
    """Open the pipeline's ledger with every topic created/checked and every consumer registered.

    Consumers are registered before any stage runs, each new one at its stage's ``start``
    (earliest: every row of its inputs). ``create=False``: a missing file is a
    LedgerNotFoundError; a missing directory is never created (``minikafka run --create``
    does that). ``register=False`` (dry runs, ``check``, ``plot``): nothing is registered,
    a run that commits nothing leaves no consumer behind. ``notes`` receives a line for
    each consumer registered now that starts past rows that exist (``start_notes``);
    ``registered`` receives each consumer's id by (stage, input topic), so a stage run later
    needs not register or look it up again. ``topics``: only these topics are opened (a
    stage's process that the runner started: the runner created and checked them all).
    """
    source = Source(str(defn.source), create=create)
    try:
        for t in defn.topics.values():
            if topics is None or t.name in topics:
                source.topic(t.name, t.model, dedup=t.dedup or None, partitions=t.partitions, key=t.key)
        if register:
            lines = register_stage_consumers(source, defn, registered=registered)
            if notes is not None:
                notes.extend(lines)
    except BaseException:
        source.close()
        raise
    return source


def register_stage_consumers(source: Source, defn: PipelineDefinition, *, dry_run: bool = False,
                             registered: dict[tuple[str, str], int] | None = None) -> list[str]:
    """Register every stage's consumer on its inputs in one transaction (``dry_run``: only say
    what registering would do); return a line for each new one that starts past existing rows:
    ``stage X: consumer starts at offset N of topic 'T', M earlier rows are skipped (start=latest)``.
    """
    from ..ledger.topics import acks
    from ..util.clock import utc_now

    now = utc_now()
    lines = []
    with source.ledger.atomic() as conn:
        for sd in defn.stages:
            for name in sd.inputs:
                if dry_run:
                    reg = acks.planned_registration(conn, name, sd.consumer, start=sd.start)
                else:
                    reg = acks.register_in_current_transaction(conn, name, sd.consumer, now, start=sd.start)
                    if registered is not None:
                        registered[(sd.name, name)] = reg.consumer_id
                note = reg.note(f"stage {sd.name}")
                if note:
                    lines.append(note + (" (dry run: nothing registered)" if dry_run else ""))
    return lines


def require_ledger(defn: PipelineDefinition) -> None:
    """A run never starts a ledger: a typo in ``source =`` must not 'succeed' with 0 rows.

    Raises:
        LedgerNotFoundError: no file at the pipeline's ``source``.
    """
    from ..errors import LedgerNotFoundError

    if not Path(defn.source).is_file():
        raise LedgerNotFoundError(
            f"no ledger at {defn.source}: check 'source =' in {defn.path} (or --source); a new ledger starts "
            "with the first 'minikafka ingest' into a declared topic, or 'minikafka run --create'",
            path=str(defn.source))


def select_stages(defn: PipelineDefinition, *, stage: str | None = None, start: str | None = None) -> list[StageDefinition]:
    if stage and start:
        raise PipelineDefinitionError("use --stage or --from, not both")
    if stage:
        return [defn.stage(stage)]
    if start:
        defn.stage(start)
        names = set(defn.downstream_of(start))
        return [s for s in defn.stages if s.name in names]
    return list(defn.stages)


def build_stage(defn: PipelineDefinition, sd: StageDefinition, *, suites: bool = True):
    """The stage to run (``suites=False``: without its expectation suites, for a run with no rows)."""
    from ..spark.stages.stage import Stage

    module = sd.job_module()
    if suites:
        sd.load_suites()
    return Stage(sd.name, sd.inputs, sd.outputs, transform=getattr(module, "transform", None),
                 row_fn=getattr(module, "row_fn", None), consumer=sd.consumer, strategy=sd.strategy,
                 max_attempts=sd.max_attempts, partitions=sd.partitions, topic_partitions=sd.topic_partitions,
                 suites=[copy.copy(suite) for suite in sd.suites] if suites else [], start=sd.start)


def spark_submit() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def submit_command(defn: PipelineDefinition, sd: StageDefinition, *, master: str, run_id: str,
                   dry_run: bool = False, staging: str | None = None, py_files: str | None = None,
                   consumer_ids: dict[str, int] | None = None, java_options: str | None = None) -> list[str]:
    """The exact spark-submit command for one stage.

    ``py_files``: a zip of the project's code for executors on other hosts
    (``code_zip``); ``staging``: the staging URI handed to the job; ``consumer_ids``:
    {input: id} of the stage's consumer, which the runner registered (the job then
    registers nothing and opens only the stage's topics); ``java_options``: the driver's
    (``spark.driver.extraJavaOptions``, see ``spark.stages.driver_jvm``; the pipeline's own wins).
    """
    from ..spark.session import jdbc_jar

    jar = jdbc_jar()
    settings = {"spark.executor.extraClassPath": jar, "spark.sql.session.timeZone": "UTC",
                "spark.ui.showConsoleProgress": "false",
                **({"spark.driver.extraJavaOptions": java_options} if java_options else {}), **defn.spark, **sd.spark}
    cmd = [spark_submit(), "--master", master, "--name", f"minikafka:{defn.name}:{sd.name}",
           "--jars", jar, "--driver-class-path", jar]
    if py_files:
        cmd += ["--py-files", py_files]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    return cmd + _job_args(defn, sd, run_id) + _job_options(staging, consumer_ids, dry_run)


def _job_args(defn: PipelineDefinition, sd: StageDefinition, run_id: str) -> list[str]:
    """The job file and what names the stage's run (both engines)."""
    return [str(sd.job_file()), "--pipeline", str(defn.path), "--stage", sd.name, "--run-id", run_id,
            "--source", str(defn.source)]


def _job_options(staging: str | None, consumer_ids: dict[str, int] | None, dry_run: bool) -> list[str]:
    """The job's options after its engine's (both engines)."""
    ids = [arg for name, cid in sorted((consumer_ids or {}).items()) for arg in ("--consumer-id", f"{name}={cid}")]
    return (["--staging", staging] if staging else []) + ids + (["--dry-run"] if dry_run else [])


def code_packages(defn: PipelineDefinition) -> list[str]:
    """Top-level packages executors must import: minikafka, the jobs' and the models' packages."""
    names = {"minikafka"}
    names.update(sd.job.split(".")[0] for sd in defn.stages)
    names.update(t.model_path.split(":")[0].split(".")[0] for t in defn.topics.values())
    return sorted(names)


def code_zip(defn: PipelineDefinition, directory: str | Path) -> Path:
    """Zip the Python sources of ``code_packages`` for --py-files (executors on other hosts)."""
    from ..util.codezip import zip_packages

    target = Path(directory) / f"minikafka-code-{defn.name}.zip"
    missing = zip_packages(code_packages(defn), target)
    if missing:
        raise PipelineDefinitionError(f"{defn.path}: cannot find package {missing[0]!r} to ship to the executors")
    return target


ENGINES = ("auto", "submit", "connect")


def run_pipeline(defn: PipelineDefinition, *, master: str | None = None, strategy: str = "strict",
                 stage: str | None = None, start: str | None = None, dry_run: bool = False,
                 in_process: bool = False, staging: str | None = None, echo=print,
                 running=None, engine: str = "submit", remote: str | None = None,
                 max_parallel: int | None = None, idle_timeout: float | None = None,
                 backup_before: str | None = None, stage_host=None) -> PipelineRun:
    """Run the selected stages in DAG order.

    strict: after a failure no further stage starts (stages already running finish).
    best_effort: every stage not downstream of a failure runs; failures are reported at the end.

    Where stages run: ``in_process``: all in this process, one Spark application.
    Otherwise each stage is its own process with its own run row and exit status:
    ``engine="submit"``: one spark-submit per stage; ``"connect"``: a client of the warm
    engine at ``remote`` (default: the pipeline's ``[engine] remote``, else the engine
    ``minikafka serve`` recorded for this pipeline); ``"auto"``: as connect, and when no
    engine runs, one is started that stops after ``idle_timeout`` seconds unused (default:
    ``[engine] idle_timeout``). Stages that do not depend on each other run side by side,
    at most ``max_parallel`` at once (default: 2 on an engine, 1 under spark-submit); the
    ledger serializes their commits. A DAG with nothing new starts no JVM and no engine.

    ``staging``: a URI every node sees (default: the pipeline's ``[spark] staging``);
    needed on a non-local master, see ``minikafka.spark.staging``. On such a master the
    project's code is zipped and shipped to the executors.

    ``backup_before``: a directory: a snapshot of the ledger is taken there (``ledger.files.backups``)
    before the first stage starts, so no stage of this run has committed into it.

    ``stage_host``: a ``stagehost.StageHost`` the caller started early (``prestart_stage_host``):
    the stages on an engine fork from it and the run closes it once they are done; the caller
    closes it too (a run that ends before its stages, or fails, leaves it open).

    ``running(label)``: a context manager shown while a stage runs (the CLI's live spinner);
    default: a "still running" line through ``echo`` after 15 s, 30 s, 1 min, ...

    Ctrl-C (KeyboardInterrupt) stops the run: the stages in flight are recorded as
    'interrupted' in the run log (nothing of them is committed), and the interrupt goes on up.

    Raises:
        LedgerNotFoundError: the pipeline's ledger does not exist (a run never creates it).
        EngineError: no engine answers at ``remote``, or the one to start did not start.
    """
    require_ledger(defn)
    if strategy not in STRATEGIES:
        raise PipelineDefinitionError(f"strategy must be 'strict' or 'best_effort', got {strategy!r}")
    if engine not in ENGINES:
        raise PipelineDefinitionError(f"engine must be one of {ENGINES}, got {engine!r}")
    if max_parallel is not None and max_parallel < 1:
        raise PipelineDefinitionError(f"max_parallel must be >= 1, got {max_parallel!r}")
    master = master or defn.master
    staging = staging or defn.staging
    chosen = select_stages(defn, stage=stage, start=start)
    result = PipelineRun(defn.name, dry_run=dry_run)
    if running is None:
        def running(label):
            return heartbeat(echo, label, HEARTBEAT_S)
    t0 = time.perf_counter()
    notes: list[str] = []
    registered: dict[tuple[str, str], int] = {}  # (stage, input) -> its consumer's id, registered once here
    from .staging_sweep import sweep_staging

    if not dry_run:
        sweep_staging(defn, remote)  # what runs that died staged
    # this process's one connection to the ledger (stages in this process run on it too)
    try:
        with open_source(defn, register=not dry_run, notes=notes, registered=registered) as source:
            result = _run_pipeline_on(source, defn, chosen, result, registered, master=master, strategy=strategy,
                                      dry_run=dry_run, in_process=in_process, staging=staging, echo=echo,
                                      running=running, engine=engine, remote=remote, max_parallel=max_parallel,
                                      idle_timeout=idle_timeout, backup_before=backup_before, notes=notes, t0=t0,
                                      stage_host=stage_host)
    finally:
        if not dry_run:
            sweep_staging(defn, remote)  # and what a write of one landed after the first sweep
    return result


def _stage_ids(registered: dict[tuple[str, str], int], sd: StageDefinition) -> dict[str, int]:
    """{input: the stage's consumer id} of the consumers ``open_source`` registered."""
    return {name: registered[(sd.name, name)] for name in sd.inputs if (sd.name, name) in registered}


def _run_pipeline_on(source: Source, defn: PipelineDefinition, chosen: list[StageDefinition], result: PipelineRun,
                     registered: dict[tuple[str, str], int], *, master: str, strategy: str, dry_run: bool,
                     in_process: bool, staging: str | None, echo, running, engine: str, remote: str | None,
                     max_parallel: int | None, idle_timeout: float | None, backup_before: str | None,
                     notes: list[str], t0: float, stage_host=None) -> PipelineRun:
    """``run_pipeline`` once the ledger is open (``source``) and the consumers registered."""
    import tempfile

    from .retired import retired_messages

    if dry_run:
        notes = register_stage_consumers(source, defn, dry_run=True)
    for line in notes:  # a new stage that starts past rows that exist says so
        echo(line)
    for line in retired_messages(defn, source.ledger.conn):
        echo(line)
    pending = {sd.name: _pending_in(source, defn, sd, registered) for sd in chosen}
    if backup_before and not dry_run:
        from ..ledger.files import backup

        echo(backup(defn.source, backup_before).summary())
    if not any(pending.values()):  # nothing new anywhere: every stage records its empty run, no JVM, no engine
        for sd in chosen:
            echo(f"-> {sd.name} ({', '.join(sd.inputs)} -> {', '.join(sd.outputs)})")
            result.outcomes.append(_run_in_process(None, defn, sd, dry_run, source=source,
                                                   consumer_ids=_stage_ids(registered, sd)))
        result.seconds = time.perf_counter() - t0
        return result
    from ..spark.session import MasterUnreachableError, check_master
    from ..spark.staging import is_local_master

    try:
        check_master(master)  # seconds, before any JVM: an unreachable master is named, not 68 s of INFO lines
    except MasterUnreachableError as exc:
        if not dry_run:
            record_failed_run(defn, new_run_id("pipeline"), str(exc),
                              details={"pipeline": defn.name, "master": redact_url(master),
                                       "stages": [s.name for s in chosen],
                                       "phase": "master check"})
        raise
    host = None  # stages on an engine fork from one pre-imported process, which imports while the engine is found
    if not in_process and engine != "submit":
        from .stagehost import start_stage_host

        host = stage_host.adopt(defn, chosen) if stage_host is not None else start_stage_host(defn, chosen)
    try:
        if in_process:  # one application: this process's own, or one client session of the engine named
            from .engine import named_engine

            url, started = (named_engine(defn, remote) if (remote or defn.engine.remote) else None), False
        else:
            url, started = _engine_url(defn, engine, remote, master, idle_timeout, echo)
    except MinikafkaError as exc:  # EngineError: nothing answers, or the engine did not start
        if host is not None:
            host.close()
        if not dry_run:
            record_failed_run(defn, new_run_id("pipeline"), str(exc),
                              details={"pipeline": defn.name,
                                       "remote": redact_url(remote or defn.engine.remote) if (remote or defn.engine.remote) else None,
                                       "stages": [s.name for s in chosen], "phase": "engine"})
        raise
    scratch = tempfile.TemporaryDirectory(prefix="minikafka-run-")
    sessions = None
    try:
        py_files = None if (is_local_master(master) and url is None) else str(code_zip(defn, scratch.name))
        if in_process:
            _run_sequentially(defn, chosen, result, strategy, master, py_files, dry_run, staging, echo, running, url,
                              source=source, registered=registered)
        else:
            source.close()  # the stages' processes open it themselves; the runner reads their rows from their output
            width = max_parallel or (defn.engine.max_parallel if url else None) or (2 if url else 1)
            if url is not None:  # per-row stages find their session made and their Python worker warm
                from .stage_sessions import StageSessions

                sessions = StageSessions(defn, [sd for sd in chosen if pending[sd.name] or _has_upstream(sd, chosen)],
                                         url, py_files)

            def launch(sd: StageDefinition, run_id: str, procs: _Children) -> StageOutcome:
                if sessions is not None:
                    sessions.started(sd.name)
                with procs.launching() as go:
                    if not go:  # Ctrl-C came first: the scheduler records the run, nothing starts
                        return StageOutcome(sd.name, "interrupted", error=INTERRUPTED)
                    return start(sd, run_id, procs)

            def start(sd: StageDefinition, run_id: str, procs: _Children) -> StageOutcome:
                # rows found pending before the run stay pending until the stage runs; a stage
                # whose input an upstream stage of this run writes is asked again
                upstream = _has_upstream(sd, chosen)
                if (upstream or not pending[sd.name]) and not _has_pending(defn, sd):
                    # nothing new: record the empty run without a JVM
                    return _run_in_process(None, defn, sd, dry_run, run_id=run_id)
                ids = _stage_ids(registered, sd)
                archive = None  # the class-data archive this stage's driver writes (its first run)
                stage_url = url
                if url is not None:
                    made = sessions.url_for(sd) if sessions is not None else None  # its code is there already
                    stage_url = made or url
                    cmd = client_command(defn, sd, stage_url, run_id, dry_run=dry_run, staging=staging,
                                         py_files=None if made else py_files, consumer_ids=ids)
                else:
                    from ..spark.session import session_conf
                    from ..spark.stages.driver_jvm import driver_options

                    java, archive = driver_options(session_conf(jar="")["spark.driver.extraJavaOptions"],
                                                   None if upstream else pending[sd.name])
                    cmd = submit_command(defn, sd, master=master, run_id=run_id, dry_run=dry_run, staging=staging,
                                         py_files=py_files, consumer_ids=ids, java_options=java)
                popen = host.launcher(sd, run_id) if (host is not None and url is not None) else None
                outcome = None
                try:
                    if width == 1:
                        with running(sd.name):
                            outcome = _run_child(defn, sd, cmd, run_id, dry_run, echo, procs, url is None, popen,
                                                 env=child_env_of(stage_url))
                    else:
                        outcome = _run_child(defn, sd, cmd, run_id, dry_run, echo, procs, url is None, popen,
                                             env=child_env_of(stage_url))
                finally:
                    if archive is not None:
                        from ..spark.stages.driver_jvm import keep_archive

                        keep_archive(archive, ok=outcome is not None and not procs.interrupted.is_set()
                                     and outcome.status in ("succeeded", "partial"))
                return outcome

            lease = None
            if url is not None:
                from .engine import EngineLease

                lease = EngineLease(defn)
            with lease or _nothing():
                _run_scheduled(defn, chosen, result, strategy, width, launch, dry_run, echo)
    finally:
        if sessions is not None:
            sessions.close()
        scratch.cleanup()
        if host is not None:
            host.close()
        if started and (defn.engine.idle_timeout if idle_timeout is None else idle_timeout) == 0:
            from .engine import stop_engine

            stop_engine(defn)
        result.seconds = time.perf_counter() - t0
    return result


def _has_upstream(sd: StageDefinition, chosen: list[StageDefinition]) -> bool:
    """Another selected stage writes one of the stage's inputs."""
    return any(set(o.outputs) & set(sd.inputs) for o in chosen if o is not sd)


@contextlib.contextmanager
def _nothing():
    yield


def _engine_url(defn: PipelineDefinition, engine: str, remote: str | None, master: str,
                idle_timeout: float | None, echo) -> tuple[str | None, bool]:
    """(the engine's URL, started by this run); (None, False): one spark-submit per stage."""
    if engine == "submit":
        return None, False
    from .engine import ensure_engine, find_engine

    url = remote or defn.engine.remote
    if url:
        from ..errors import EngineError
        from ..spark.engine import answers, parse_remote

        if not answers(*parse_remote(url), timeout=3.0):
            raise EngineError(f"no engine answers at {redact_url(url)}: start one with 'minikafka serve', or run with "
                              "--engine submit; nothing was run")
        return url, False
    found = find_engine(defn)
    if found is not None:
        return found.url, False
    if engine == "connect":
        from ..errors import EngineError

        raise EngineError(f"no engine runs for pipeline {defn.name}: start one with 'minikafka serve --pipeline "
                          f"{defn.path}', give --remote sc://HOST:PORT, or run with --engine auto")
    return ensure_engine(defn, master=master, idle_timeout=idle_timeout, echo=echo)


def _run_sequentially(defn: PipelineDefinition, chosen: list[StageDefinition], result: PipelineRun, strategy: str,
                      master: str, py_files: str | None, dry_run: bool, staging: str | None, echo, running,
                      url: str | None = None, *, source: Source,
                      registered: dict[tuple[str, str], int]) -> None:
    """``--in-process``: every stage in this process, in DAG order, in one Spark application
    (or one client session of the engine at ``url``), on the runner's ``source`` with the
    consumer ids it ``registered``."""
    spark = None
    blocked: set[str] = set()
    for sd in chosen:
        if blocked & set(sd.inputs) or (strategy == "strict" and result.failed):
            result.outcomes.append(StageOutcome(sd.name, "skipped", error="upstream stage failed"))
            blocked.update(sd.outputs)
            continue
        run_id = new_run_id(sd.name)  # the stage's one run row, whoever writes it
        try:
            echo(f"-> {sd.name} ({', '.join(sd.inputs)} -> {', '.join(sd.outputs)})")
            ids = _stage_ids(registered, sd)
            if not _pending_in(source, defn, sd, registered):
                # nothing new: record the empty run without starting a JVM
                outcome = _run_in_process(None, defn, sd, dry_run, run_id=run_id, source=source, consumer_ids=ids)
            else:
                with running(sd.name):
                    if spark is None:
                        spark, outcome = _start_session(defn, sd, master, py_files, dry_run, url, run_id)
                    if spark is not None:
                        outcome = _run_in_process(spark, defn, sd, dry_run, staging, run_id=run_id, source=source,
                                                  consumer_ids=ids)
        except KeyboardInterrupt as exc:
            if not dry_run:
                _record_interrupted(defn, sd, run_id, error=interruption(exc))
            raise
        _note_quarantine(defn, outcome, source)
        result.outcomes.append(outcome)
        if outcome.status == "failed":
            blocked.update(sd.outputs)


def _run_scheduled(defn: PipelineDefinition, chosen: list[StageDefinition], result: PipelineRun, strategy: str,
                   width: int, launch, dry_run: bool, echo) -> None:
    """Start each stage once every selected stage that writes one of its inputs has ended,
    at most ``width`` at once; one line per stage as it ends; outcomes in DAG order."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    writers = {sd.name: {o.name for o in chosen if o is not sd and set(o.outputs) & set(sd.inputs)} for sd in chosen}
    outcomes: dict[str, StageOutcome] = {}
    waiting = list(chosen)
    in_flight: dict = {}  # future -> (stage, run id)
    procs = _Children()  # the stages' running processes (for Ctrl-C)
    started: dict[str, tuple] = {}  # stage -> (stage, run id): started, not yet ended
    blocked: set[str] = set()
    pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="minikafka-stage")
    try:
        while waiting or in_flight:
            for sd in list(waiting):
                stop = strategy == "strict" and any(o.status == "failed" for o in outcomes.values())
                if stop or blocked & set(sd.inputs):
                    waiting.remove(sd)
                    outcomes[sd.name] = StageOutcome(sd.name, "skipped", error="upstream stage failed")
                    blocked.update(sd.outputs)
                    echo(f"   {sd.name}: skipped (upstream stage failed)")
                    continue
                if len(in_flight) >= width or not writers[sd.name] <= set(outcomes):
                    continue
                waiting.remove(sd)
                started[sd.name] = (sd, new_run_id(sd.name))  # from here on, Ctrl-C leaves that run a row
                echo(f"-> {sd.name} ({', '.join(sd.inputs)} -> {', '.join(sd.outputs)})")
                in_flight[pool.submit(launch, *started[sd.name], procs)] = started[sd.name]
            if not in_flight:
                break
            done, _ = wait(list(in_flight), timeout=1.0, return_when=FIRST_COMPLETED)
            for future in done:
                sd, _run_id = in_flight.pop(future)
                outcome = future.result()
                started.pop(sd.name, None)
                _note_quarantine(defn, outcome)
                outcomes[sd.name] = outcome
                if outcome.status == "failed":
                    blocked.update(sd.outputs)
                if len(chosen) > 1:
                    r = outcome.run or {}
                    echo(f"   {sd.name}: {outcome.status} in {outcome.seconds:.1f}s "
                         f"(in {r.get('rows_in', 0) or 0}, out {r.get('rows_out', 0) or 0})")
    except KeyboardInterrupt as exc:
        from ..util.procs import kill_group

        procs.interrupted.set()  # no stage process starts from now on; those running are killed
        for proc in list(procs.running.values()):
            kill_group(proc)
        pool.shutdown(wait=True, cancel_futures=True)
        procs.wait_idle()  # a launch the interrupt caught inside submit() is not joined by the pool
        if not dry_run:  # every stage started gets its run's row: the one its process wrote, or this
            for sd, run_id in started.values():
                _record_interrupted(defn, sd, run_id, procs.phases.get(sd.name, "start"), error=interruption(exc))
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    result.outcomes = [outcomes[sd.name] for sd in chosen if sd.name in outcomes]


def _note_quarantine(defn: PipelineDefinition, outcome: StageOutcome, source: Source | None = None) -> None:
    """Name the quarantine a run sent every row to (the run table says so)."""
    from ..ledger.consuming import quarantine_topics, quarantined_everything

    if outcome.run and outcome.run.get("run_id") and quarantined_everything(outcome.run):
        with contextlib.nullcontext(source) if source is not None else Source(str(defn.source)) as opened:
            outcome.quarantined_to = quarantine_topics(opened.ledger.conn, outcome.run["run_id"]) or \
                list(outcome.run.get("inputs") or [])[:1]


def _start_session(defn: PipelineDefinition, sd: StageDefinition, master: str, py_files: str | None,
                   dry_run: bool, url: str | None = None, run_id: str | None = None):
    """(SparkSession, None), or (None, the failed outcome, recorded) when the JVM does not start
    (``url``: a client session of that engine, the code shipped to it)."""
    from ..spark.session import build_session

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


def record_failed_run(defn: PipelineDefinition, run_id: str, error: str, sd: StageDefinition | None = None,
                      details: dict | None = None, status: str = "failed", keep: bool = False) -> dict | None:
    """Write a failed (or ``status`` 'interrupted') run that never reached the stage's own
    commit (master unreachable, spark-submit did not launch, the job failed before running
    the stage, Ctrl-C); return its row.

    Without ``sd`` the row is the pipeline's (kind 'pipeline'). ``keep``: a row the run
    already has (written by the stage itself) stays as it is. A ledger that cannot take
    the row does not hide the failure itself: None comes back.
    """
    run = RunResult(run_id, "stage" if sd else "pipeline", stage=sd.name if sd else None,
                    consumer=sd.consumer if sd else None, inputs=list(sd.inputs) if sd else [],
                    outputs=list(sd.outputs) if sd else [], details=details)
    run.finish(status, error)
    try:
        with Source(str(defn.source)) as source:
            with source.ledger.atomic() as conn:
                if keep:
                    insert_run_unless_present_in_current_transaction(conn, run)
                else:
                    write_run_in_current_transaction(conn, run)
            return _run_row(source, run_id)
    except Exception:  # noqa: BLE001 - the original failure matters more than its log row
        return None


def _record_interrupted(defn: PipelineDefinition, sd: StageDefinition, run_id: str, phase: str = "start", *,
                        error: str = INTERRUPTED) -> None:
    """After Ctrl-C (or SIGTERM: ``error`` says which), once no process of the run can write
    any more: an 'interrupted' row for the stage's run ``run_id``, unless that run wrote its
    own (the stage's handler, its commit just before, its failure). Keyed by the run id, in
    one transaction: the only writer of a run's 'interrupted' row in a pipeline run."""
    record_failed_run(defn, run_id, error, sd, details={"phase": phase}, status="interrupted", keep=True)


def _has_pending(defn: PipelineDefinition, sd: StageDefinition) -> bool:
    with Source(str(defn.source)) as source:
        return bool(_pending_in(source, defn, sd))


def _pending_in(source: Source, defn: PipelineDefinition, sd: StageDefinition,
                registered: dict[tuple[str, str], int] | None = None) -> int:
    """The rows the stage has to read now (a consumer not registered yet: from its stage's start).
    ``registered``: the consumers' ids by (stage, input), as ``open_source`` gives them."""
    from ..ledger.topics import find_consumer, lag

    rows = 0
    for name in sd.inputs:
        consumer_id = (registered or {}).get((sd.name, name))
        if consumer_id is None:
            consumer_id = find_consumer(source.ledger.conn, name, sd.consumer)
        # a consumer not registered yet (a dry run registers none) would start at its stage's start
        rows += sum(lag(source.ledger.conn, name, consumer_id, start=sd.start).values())
    return rows


def _run_in_process(spark, defn: PipelineDefinition, sd: StageDefinition, dry_run: bool,
                    staging: str | None = None, upto: dict[str, int] | None = None,
                    run_id: str | None = None, source: Source | None = None,
                    consumer_ids: dict[str, int] | None = None) -> StageOutcome:
    """Run one stage in this process (``spark`` None: a run with no rows, no JVM), on
    ``source`` (the runner's, every topic open and ``consumer_ids`` registered) or on the
    ledger opened for it."""
    if source is not None:
        return _run_on(spark, source, defn, sd, dry_run, staging, upto, run_id, consumer_ids)
    with open_source(defn, register=not dry_run) as opened:
        return _run_on(spark, opened, defn, sd, dry_run, staging, upto, run_id, None)


def _run_on(spark, source: Source, defn: PipelineDefinition, sd: StageDefinition, dry_run: bool,
            staging: str | None, upto: dict[str, int] | None, run_id: str | None,
            consumer_ids: dict[str, int] | None) -> StageOutcome:
    from ..errors import StageRunningError, StagingError
    from ..spark.stages.stage import StageFailed, run_stage

    t0 = time.perf_counter()
    for key, value in sd.spark.items():
        if spark is not None and key.startswith("spark.sql."):
            spark.conf.set(key, value)
    try:
        if sd.window_rows:  # a backlog in chunks of N input rows, one commit each
            from ..spark.stages.chunks import combine, run_stage_in_chunks

            row = combine(run_stage_in_chunks(spark, source, build_stage(defn, sd), sd.window_rows,
                                              run_id=run_id, dry_run=dry_run, upto=upto, staging=staging))
            return StageOutcome(sd.name, row["status"], time.perf_counter() - t0, row)
        run = run_stage(spark, source, build_stage(defn, sd, suites=spark is not None), dry_run=dry_run,
                        upto=upto, staging=staging, run_id=run_id, consumer_ids=consumer_ids)
    except StageFailed as exc:
        return StageOutcome(sd.name, "failed", time.perf_counter() - t0, _run_row(source, exc.run_id), str(exc))
    except (StageRunningError, StagingError) as exc:
        row = None if dry_run else record_failed_run(defn, run_id or new_run_id(sd.name), str(exc), sd,
                                                     details={"phase": "start"})
        return StageOutcome(sd.name, "failed", time.perf_counter() - t0, row, str(exc))
    row = _run_row(source, run.run_id) or run.as_row()
    return StageOutcome(sd.name, run.status, time.perf_counter() - t0, row)


def client_command(defn: PipelineDefinition, sd: StageDefinition, url: str, run_id: str, *,
                   dry_run: bool = False, staging: str | None = None, py_files: str | None = None,
                   consumer_ids: dict[str, int] | None = None) -> list[str]:
    """The command of one stage as a client of the engine at ``url``: the same job file, run
    by this Python (no spark-submit, no JVM of its own)."""
    from ..util.redact import url_secrets

    # a URL with a token goes through the environment (child_env_of): a command line is public (ps, /proc)
    where = ["--remote-env"] if url_secrets(url) else ["--remote", url]
    code = ["--py-files", py_files] if py_files else []
    return [sys.executable, *_job_args(defn, sd, run_id), *where, *code, *_job_options(staging, consumer_ids, dry_run)]


class _Children:
    """The running stage processes of a run, whether Ctrl-C stopped it, and the launches in
    flight (so Ctrl-C's clean-up waits until no process of the run can still start)."""

    def __init__(self):
        import threading

        self.running: dict[str, object] = {}
        self.phases: dict[str, str] = {}  # stage -> what ran it ('spark-submit', ...), once launched
        self.interrupted = threading.Event()
        self._active = 0
        self._idle = threading.Condition()

    @contextlib.contextmanager
    def launching(self):
        """Around one stage's launch: yields False when Ctrl-C came first (start nothing)."""
        with self._idle:
            self._active += 1
        try:
            yield not self.interrupted.is_set()
        finally:
            with self._idle:
                self._active -= 1
                self._idle.notify_all()

    def wait_idle(self) -> None:
        """Until no launch is in flight (after ``interrupted`` is set, none begins)."""
        with self._idle:
            self._idle.wait_for(lambda: self._active == 0)


def child_env_of(url: str | None) -> dict[str, str]:
    """A stage process's environment: this one's (``child_env``), and the engine's URL in
    ``MINIKAFKA_ENGINE_URL`` for a client started with ``--remote-env``."""
    from ..spark.engine import ENGINE_URL_ENV

    env = submit_env()
    if url is not None:
        env[ENGINE_URL_ENV] = url
    return env


def _run_child(defn: PipelineDefinition, sd: StageDefinition, cmd: list[str], run_id: str, dry_run: bool, echo,
               procs: _Children, needs_java: bool, popen, env: dict[str, str]) -> StageOutcome:
    """Run one stage's process (spark-submit, or a client of the engine); read back its run row.

    ``popen``: starts the process instead of ``popen_tied``, with its signature and a
    Popen-like result (pid, communicate(), returncode, its own process group): the stage
    host's forked children (``stagehost``)."""
    import subprocess

    from ..spark.session import SparkSetupError, check_java
    from ..util.procs import popen_tied

    t0 = time.perf_counter()
    launcher = "spark-submit" if needs_java else "the stage's client"
    try:
        if needs_java:
            check_java()  # spark-submit itself would only say "JAVA_HOME is not set"
    except SparkSetupError as exc:
        row = None if dry_run else record_failed_run(defn, run_id, str(exc), sd, details={"phase": "launch"})
        return StageOutcome(sd.name, "failed", time.perf_counter() - t0, row, str(exc))
    if log.isEnabledFor(logging.DEBUG):
        import shlex

        log.debug("stage %s: %s", sd.name, shlex.join(cmd))
    # the stage dies with this runner: a killed nightly leaves no orphan still staging or committing
    try:
        proc = (popen or popen_tied)(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        error = f"{launcher} did not launch ({cmd[0]}): {exc.strerror or exc}"
        row = None if dry_run else record_failed_run(defn, run_id, error, sd, details={"phase": "launch"})
        return StageOutcome(sd.name, "failed", time.perf_counter() - t0, row, error)
    procs.running[sd.name], procs.phases[sd.name] = proc, launcher
    if procs.interrupted.is_set():  # Ctrl-C came while it started
        from ..util.procs import kill_group

        kill_group(proc)
    try:
        stdout, stderr = proc.communicate()
    finally:
        procs.running.pop(sd.name, None)
    seconds = time.perf_counter() - t0
    if procs.interrupted.is_set():  # killed by Ctrl-C: its run's row is the clean-up's to write
        return StageOutcome(sd.name, "interrupted", seconds, None, INTERRUPTED)
    if os.environ.get("MINIKAFKA_VERBOSE"):  # the CLI's --verbose: show the stage's own output
        echo(stderr.rstrip())
    summary = _last_json(stdout)
    if proc.returncode == 0 and summary and summary.get("run_id") == run_id:
        row = decoded(dict(summary))  # the run's row as the stage committed it: nothing to read back
    else:
        with Source(str(defn.source)) as source:
            row = _run_row(source, run_id)
    details = (summary or {}).get("details")
    if summary and (row is None or (isinstance(details, dict) and details.get("chunks"))):
        row = summary  # a chunked stage prints the sum of its chunks
    if proc.returncode != 0:
        error = (row or {}).get("error") or _cause(stderr, proc.returncode, launcher)
        if row is None and not dry_run:  # it failed before the stage wrote its run: record it here
            row = record_failed_run(defn, run_id, error, sd, details={"phase": launcher,
                                                                      "exit_code": proc.returncode})
        return StageOutcome(sd.name, "failed", seconds, row, error)
    if row is None:
        error = (f"{sd.job_file()} exited without running the stage: does it end with "
                 "'raise SystemExit(minikafka.job.main())'?")
        if not dry_run:
            row = record_failed_run(defn, run_id, error, sd, details={"phase": launcher, "exit_code": 0})
        return StageOutcome(sd.name, "failed", seconds, row, error)
    return StageOutcome(sd.name, (row or {}).get("status", "succeeded"), seconds, row)


def _run_row(source: Source, run_id: str) -> dict | None:
    rows = read_runs(source.ledger.conn, run_id=run_id, limit=1)
    return rows[0] if rows else None


def _last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN) ")


def _cause(stderr: str, code: int, launcher: str = "spark-submit", lines: int = 15) -> str:
    """What made spark-submit (or a stage's client) fail: the job's own ``minikafka:`` message, else the last
    lines that are not Spark's INFO/WARN log lines or stack frames."""
    text = stderr.strip().splitlines()
    ours = [line for line in text if line.startswith("minikafka: ")]
    if ours:
        return "\n".join(line[len("minikafka: "):] for line in ours[-lines:])
    keep = [line for line in text if line.strip() and not LOG_LINE.match(line) and not line.startswith("\tat ")]
    if not keep:
        return f"{launcher} exited with code {code} (run with --verbose to see its output)"
    return "\n".join(keep[-lines:])

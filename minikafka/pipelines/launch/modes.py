"""Which launcher a run's stages get, and everything it needs open while they run.

``open_launcher`` checks the master (seconds, before any JVM), finds or starts the engine,
zips the project's code when another host needs it, starts the stage host and the per-row
sessions, holds the engine's lease, and closes all of it when the run ends. The scheduler
only calls the launcher it yields.
"""

from __future__ import annotations

import contextlib
import tempfile

from ...api.source import Source
from ...errors import EngineError, MinikafkaError
from ...ledger.consuming import new_run_id
from ...util.redact import redact_url
from ..definition import PipelineDefinition, StageDefinition, has_upstream
from ..failures import record_failed_run
from ..options import RunOptions
from .client import ClientLauncher
from .code import code_zip
from .inprocess import InProcessLauncher
from .submit import SubmitLauncher


@contextlib.contextmanager
def open_launcher(defn: PipelineDefinition, chosen: list[StageDefinition], opts: RunOptions, *, source: Source,
                  registered: dict[tuple[str, str], int], pending: dict[str, int], echo, stage_host=None):
    """The launcher of the run ``opts`` (resolved: ``opts.of(defn)``) of the stages ``chosen``.

    ``source``: the scheduler's ledger (the in-process launcher runs on it; the others
    close it, their processes open their own); ``registered``: the consumers' ids;
    ``pending``: rows each stage has now; ``stage_host``: a host started early
    (``stagehost.prestart_stage_host``), adopted here.

    Raises:
        MasterUnreachableError: nothing answers at a spark:// master (a 'pipeline' run row says so).
        EngineError: no engine answers, or the one to start did not start (the same).
    """
    from ...spark.session import MasterUnreachableError, check_master
    from ...spark.staging import is_local_master

    try:
        check_master(opts.master)  # seconds, before any JVM: an unreachable master is named, not 68 s of INFO lines
    except MasterUnreachableError as exc:
        if not opts.dry_run:
            record_failed_run(defn, new_run_id("pipeline"), str(exc),
                              details={"pipeline": defn.name, "master": redact_url(opts.master),
                                       "stages": [s.name for s in chosen], "phase": "master check"})
        raise
    host = None  # stages on an engine fork from one pre-imported process, which imports while the engine is found
    if not opts.in_process and opts.engine != "submit":
        from .stagehost import start_stage_host

        host = stage_host.adopt(defn, chosen) if stage_host is not None else start_stage_host(defn, chosen)
    remote = opts.remote or defn.engine.remote
    try:
        if opts.in_process:  # one application: this process's own, or one client session of the engine named
            from .engine import named_engine

            url, started = (named_engine(defn, opts.remote) if remote else None), False
        else:
            url, started = engine_url(defn, opts, echo)
    except MinikafkaError as exc:  # EngineError: nothing answers, or the engine did not start
        if host is not None:
            host.close()
        if not opts.dry_run:
            record_failed_run(defn, new_run_id("pipeline"), str(exc),
                              details={"pipeline": defn.name, "remote": redact_url(remote) if remote else None,
                                       "stages": [s.name for s in chosen], "phase": "engine"})
        raise
    scratch = tempfile.TemporaryDirectory(prefix="minikafka-run-")
    sessions = None
    try:
        py_files = None if (is_local_master(opts.master) and url is None) else str(code_zip(defn, scratch.name))
        if opts.in_process:
            yield InProcessLauncher(defn, source=source, registered=registered, master=opts.master,
                                    staging=opts.staging, dry_run=opts.dry_run, url=url, py_files=py_files,
                                    logical_date=opts.logical_date)
            return
        source.close()  # the stages' processes open it themselves; the runner reads their rows from their output
        width = opts.max_parallel or (defn.engine.max_parallel if url else None) or (2 if url else 1)
        common = dict(registered=registered, dry_run=opts.dry_run, staging=opts.staging, echo=echo, width=width,
                      logical_date=opts.logical_date)
        if url is None:
            yield SubmitLauncher(defn, master=opts.master, py_files=py_files, **common)
            return
        from .engine import EngineLease
        from .stage_sessions import StageSessions

        # per-row stages find their session made and their Python worker warm
        sessions = StageSessions(defn, [sd for sd in chosen if pending[sd.name] or has_upstream(sd, chosen)],
                                 url, py_files)
        with EngineLease(defn, url, master=opts.master, idle_timeout=opts.idle_timeout):
            yield ClientLauncher(defn, url=url, py_files=py_files, host=host, sessions=sessions, **common)
    finally:
        if sessions is not None:
            sessions.close()
        scratch.cleanup()
        if host is not None:
            host.close()
        if started and (defn.engine.idle_timeout if opts.idle_timeout is None else opts.idle_timeout) == 0:
            from .engine import stop_engine

            stop_engine(defn, opts.master, alone=True)


def engine_url(defn: PipelineDefinition, opts: RunOptions, echo) -> tuple[str | None, bool]:
    """(the engine's URL, started by this run); (None, False): one spark-submit per stage."""
    if opts.engine == "submit":
        return None, False
    from ...spark.engine import answers, parse_remote
    from .engine import ensure_engine, find_engine

    url = opts.remote or defn.engine.remote
    if url:
        if not answers(*parse_remote(url), timeout=3.0):
            raise EngineError(f"no engine answers at {redact_url(url)}: start one with 'minikafka serve', or run with "
                              "--engine submit; nothing was run")
        return url, False
    found = find_engine(defn, opts.master)
    if found is not None:
        return found.url, False
    if opts.engine == "connect":
        raise EngineError(f"no engine runs for pipeline {defn.name}: start one with 'minikafka serve --pipeline "
                          f"{defn.path}', give --remote sc://HOST:PORT, or run with --engine auto")
    return ensure_engine(defn, master=opts.master, idle_timeout=opts.idle_timeout, echo=echo)

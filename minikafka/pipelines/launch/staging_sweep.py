"""Remove what runs that died left in the staging area, as a run starts and as it ends.

A stage's run marks where it stages before it stages anything (``spark.staging.mark_staged``,
under the stage's lock, beside the ledger) and removes mark and staging as it ends. A run
killed in between (its leader SIGKILLed, the machine rebooted) never commits: its mark names
staging nothing will ever read. The stage's own next run removes it, but a stage that is not
run again, or an engine that was still writing for the dead run after that, left it for good.

So ``run`` sweeps every stage of its pipeline whose lock is free (a stage running now, in
this run or another, is left alone: it may still commit what it staged). A dead run's work on
a warm engine is stopped first: its client session is released (the engine interrupts what
the session still runs), so no write lands after the sweep; a mark is kept until a sweep
finds nothing left to remove, in case one did.
"""

from __future__ import annotations

import logging
import os

from ..definition import PipelineDefinition

log = logging.getLogger("minikafka.pipelines")


def sweep_staging(defn: PipelineDefinition, remote: str | None = None) -> list[str]:
    """Sweep the staging of the pipeline's dead runs (see the module); return the URIs removed.
    Never raises: a sweep that cannot finish leaves the rest to the next one."""
    from ...spark.staging import sweep

    engines: dict[str, str | None] = {}

    def release(mark) -> None:
        if mark.engine not in engines:
            engines[mark.engine] = _engine_for(defn, remote, mark.engine)
        if engines[mark.engine]:
            _release(engines[mark.engine], mark.session)

    try:
        removed = sweep(defn.source, [sd.name for sd in defn.stages], release)
    except Exception as exc:  # noqa: BLE001 - the run itself matters more than yesterday's leftovers
        log.debug("staging sweep: %s", exc)
        return []
    for uri in removed:
        log.info("removed the staging of a run that died: %s", uri)
    return removed


def _engine_for(defn: PipelineDefinition, remote: str | None, engine: str | None) -> str | None:
    """The full URL (token included) of the engine a mark names (``sc://HOST:PORT``): the one
    given, the pipeline's, or one of the user's running engines; None when none of them is that engine."""
    from ...spark.engine import parse_remote
    from ...spark.engines import running

    if not engine:
        return None
    for url in (remote, defn.engine.remote, *(state.url for _path, state in running())):
        if url and parse_remote(url) == parse_remote(engine):
            return url
    return None


def _release(url: str, session_id: str) -> None:
    """Release a dead run's session on the engine (its operations are interrupted); the Connect
    mode switch ``connect`` sets is put back (this process may run classic sessions)."""
    from .stage_sessions import _release as release_session

    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    try:
        release_session(url, session_id)
    finally:
        if before is None:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        else:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = before

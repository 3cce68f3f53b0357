"""The stage host of a run on an engine: stages forked from one pre-imported process.

A stage on a warm engine is a small client process, and most of its cost was Python's
imports: pyspark's Connect client, pandas and pyarrow (about 0.5 s), and great-expectations
for a stage with a suite (about 2.7 s), paid again by every stage. ``run`` therefore starts
one host (``util.forkserver``) while it finds or starts the engine; the host imports that
library code once, and each stage's job file then runs in a child forked from it, with the
same argv, environment, working directory, output pipes, process group and exit status as
the fresh ``python JOB ...`` it replaces. Job files and the modules they import (the user's
jobs and models) are imported in the child, never in the host.

The host dies with the run, and each child with the host. A host that fails to start or
dies is not an error: its stages start as fresh processes, and a stage whose child died
with the host before it wrote its run row starts again fresh. ``MINIKAFKA_STAGE_HOST=0``
turns the host off (one fresh process per stage, as before).
"""

from __future__ import annotations

import os

from ...api.source import Source
from ...ledger.consuming import read_runs
from ...util.forkserver import ForkServer
from ...util.procs import child_env
from ..definition import PipelineDefinition, StageDefinition

ENV = "MINIKAFKA_STAGE_HOST"
# what every stage client imports (measured: the modules a stage's child loads that are not the user's)
CLIENT_MODULES = [
    "pandas", "pyarrow", "pyarrow.dataset", "pyarrow.parquet", "grpc", "pyspark.sql.connect.session",
    "pyspark.sql.connect.functions",
    "pyspark.sql.connect.dataframe", "minikafka.pipelines.launch.call",
    "minikafka.pipelines.launch.inprocess", "minikafka.pipelines.opening",
    "minikafka.spark.engine", "minikafka.spark.staging", "minikafka.spark.stages.stage",
]
QUALITY_MODULES = ["minikafka.quality.validate"]  # imports great-expectations as quality.gx_env does


def enabled() -> bool:
    """The host is on unless ``MINIKAFKA_STAGE_HOST`` is 0/false/no/off."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def needs(sd: StageDefinition) -> list[str]:
    """The modules a stage's child needs beyond the client's: great-expectations for suites."""
    return QUALITY_MODULES if sd.expectations else []


class StageHost:
    """One run's host; ``launcher(...)`` gives ``child.run_child`` its process starter.

    ``defn``/``chosen`` None: started before the pipeline is read (``prestart_stage_host``);
    ``adopt`` then names the run's pipeline and stages.
    """

    def __init__(self, defn: PipelineDefinition | None, chosen: list[StageDefinition]):
        self.defn = defn
        env = child_env()
        env.setdefault("GX_ANALYTICS_ENABLED", "false")  # as quality.gx_env sets before its import
        env.setdefault("GX_USAGE_STATISTICS_ENABLED", "false")
        # great-expectations (about 1 s, scipy and altair deferred) after the client's modules: a stage
        # without a suite need not wait for it
        self.server = ForkServer(CLIENT_MODULES, later=_later(chosen), env=env)

    def adopt(self, defn: PipelineDefinition, chosen: list[StageDefinition]) -> StageHost:
        """Serve the run of ``defn``'s stages ``chosen`` (the modules their children need are imported next)."""
        self.defn = defn
        self.server.preload(_later(chosen))
        return self

    def launcher(self, sd: StageDefinition, run_id: str):
        """A ``popen_tied``-like callable that starts a stage's client command in the host;
        if the host dies under the stage before its run row is written, it starts fresh."""
        def popen(cmd: list[str], **kwargs):
            return self.server.popen(cmd, retry=lambda: not self._wrote_run(run_id), needs=needs(sd), **kwargs)

        return popen

    def _wrote_run(self, run_id: str) -> bool:
        with Source(str(self.defn.source)) as source:
            return bool(read_runs(source.ledger.conn, run_id=run_id, limit=1))

    def close(self) -> None:
        self.server.close()


def _later(chosen: list[StageDefinition]) -> list[str]:
    return sorted({name for sd in chosen for name in needs(sd)}, key=QUALITY_MODULES.index)


def start_stage_host(defn: PipelineDefinition, chosen: list[StageDefinition]) -> StageHost | None:
    """The run's stage host, started now (it imports in the background); None when turned off."""
    return StageHost(defn, chosen) if enabled() else None


def prestart_stage_host() -> StageHost | None:
    """A stage host started before the pipeline is read (``run`` on an engine starts it first
    thing, so its imports overlap the command's own start); hand it to ``run_pipeline``, which
    adopts or closes it. None when turned off."""
    return StageHost(None, []) if enabled() else None

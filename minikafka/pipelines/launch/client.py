"""Each stage a small client process of the warm engine (``run`` on an engine: auto or connect).

The client is this Python running the job file (no spark-submit, no JVM of its own), forked
from the run's stage host when there is one (``stagehost``), attached to the session made
ahead for it when its stage is per-row (``stage_sessions``).
"""

from __future__ import annotations

import sys

from ..definition import PipelineDefinition, StageDefinition
from .call import StageCall
from .child import ChildLauncher


def client_command(defn: PipelineDefinition, sd: StageDefinition, url: str, run_id: str, *,
                   dry_run: bool = False, staging: str | None = None, py_files: str | None = None,
                   consumer_ids: dict[str, int] | None = None) -> list[str]:
    """The command of one stage as a client of the engine at ``url``: the same job file, run
    by this Python (no spark-submit, no JVM of its own). A URL with a token is not on it
    (``StageCall``)."""
    call = StageCall.of(defn, sd, run_id, dry_run=dry_run, staging=staging, consumer_ids=consumer_ids or {},
                        remote=url, py_files=py_files)
    return [sys.executable, *call.to_argv()]


class ClientLauncher(ChildLauncher):
    """Stages as clients of the engine at ``url``; ``host``: the run's stage host (or None);
    ``sessions``: the per-row stages' sessions made ahead (or None); ``py_files``: the code
    shipped by a client that makes its own session."""

    label = "the stage's client"

    def __init__(self, defn: PipelineDefinition, *, url: str, py_files: str | None, host=None, sessions=None,
                 **common):
        super().__init__(defn, **common)
        self.url, self.py_files, self.host, self.sessions = url, py_files, host, sessions

    def starting(self, sd: StageDefinition) -> None:
        if self.sessions is not None:
            self.sessions.started(sd.name)

    def command(self, sd: StageDefinition, run_id: str, pending: int | None) -> tuple[list[str], StageCall]:
        made = self.sessions.url_for(sd) if self.sessions is not None else None  # its code is there already
        call = self.call(sd, run_id, remote=made or self.url, py_files=None if made else self.py_files)
        return [sys.executable, *call.to_argv()], call

    def popen(self, sd: StageDefinition, run_id: str):
        return self.host.launcher(sd, run_id) if self.host is not None else None

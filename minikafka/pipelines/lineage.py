"""OpenLineage events of a pipeline's stage runs, sent where ``[lineage]`` says.

``[lineage]`` in the pipeline file::

    [lineage]
    namespace = "homelab"                      # the jobs' namespace (default: the pipeline's name)
    file = "../lineage/events.jsonl"           # JSON lines, appended (relative to the pipeline file)
    url = "http://127.0.0.1:5000/api/v1/lineage"  # POSTed one event at a time (Marquez, DataHub...)
    api_key_env = "LINEAGE_API_KEY"            # the variable holding a bearer token for url
    timeout = 5                                # seconds per POST
    transport = "openlineage"                  # also hand each event to openlineage-python's client
                                               # (extra lineage), configured the OpenLineage way:
                                               # openlineage.yml or OPENLINEAGE_* variables

The scheduler (``runner``) and ``watch`` send a stage run's START before the stage starts and its
COMPLETE, FAIL or ABORT once the run's row is in the run log, built from that row
(``observe.lineage``). Each START is noted in the ledger first (``ledger.consuming.lineage_log``)
with the process that sends it, so the next run of the pipeline sends the FAIL of a run whose
process was killed (SIGKILL, the OOM killer) before it could. Lineage never fails a run: a
transport that does not answer costs one warning line per event. The token is read from the
environment at send time; it is never in the file, an event, an error or the ledger.
"""

from __future__ import annotations

import fcntl
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PipelineDefinitionError
from ..ledger.consuming import lineage_log, read_runs
from ..ledger.transactions import read_identity
from ..observe.lineage import Dataset, StageJob, end_event, location_dataset, start_event
from ..util.clock import utc_now
from ..util.faults import checkpoint
from ..util.liveness import process_state, this_process
from ..util.redact import redact_and_cut, redact_url

LINEAGE_KEYS = ("namespace", "file", "url", "api_key_env", "timeout", "transport")
TRANSPORTS = ("openlineage",)


@dataclass(frozen=True)
class LineageSettings:
    """``[lineage]``: where events go (a file, a URL, or both) and the jobs' namespace."""

    namespace: str | None = None
    file: Path | None = None
    url: str | None = None
    api_key_env: str | None = None
    timeout: float = 5.0
    transport: str | None = None  # "openlineage": openlineage-python's configured transport too


def parse_lineage(path: Path, spec: dict[str, Any] | None) -> LineageSettings | None:
    """``[lineage]`` of the pipeline file ``path`` (None when there is none).

    Raises:
        PipelineDefinitionError: neither file nor url, a url that is not http(s), a bad timeout.
    """
    if spec is None:
        return None
    where = f"{path}: lineage"
    transport = spec.get("transport")
    if transport is not None and transport not in TRANSPORTS:
        raise PipelineDefinitionError(f"{where}.transport: {transport!r} is not one of {', '.join(TRANSPORTS)}")
    if transport == "openlineage":
        import importlib.util

        if importlib.util.find_spec("openlineage") is None:
            raise PipelineDefinitionError(f"{where}.transport: 'openlineage' needs openlineage-python: "
                                          "pip install 'minikafka-spark[lineage]'")
    if not spec.get("file") and not spec.get("url") and transport is None:
        raise PipelineDefinitionError(f"{where}: give file = \"events.jsonl\", url = \"http://host/api/v1/lineage\" "
                                      "or transport = \"openlineage\"")
    url = spec.get("url")
    if url is not None and not str(url).startswith(("http://", "https://")):
        raise PipelineDefinitionError(f"{where}.url: an http:// or https:// URL, got {redact_url(url)!r}")
    timeout = spec.get("timeout", 5.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise PipelineDefinitionError(f"{where}.timeout: seconds > 0, got {timeout!r}")
    env = spec.get("api_key_env")
    if env is not None and not str(env).replace("_", "").isalnum():
        raise PipelineDefinitionError(f"{where}.api_key_env: the name of an environment variable, got {env!r}")
    file = spec.get("file")
    return LineageSettings(namespace=spec.get("namespace"), file=(path.parent / file).resolve() if file else None,
                           url=url, api_key_env=env, timeout=float(timeout), transport=transport)


class Lineage:
    """Sends the events of one pipeline run's stages (one per scheduler, used from its thread)."""

    def __init__(self, defn, source, settings: LineageSettings, echo=print):
        self.defn, self.source, self.settings, self.echo = defn, source, settings, echo
        self.ledger_id = read_identity(source.ledger.conn) or "unknown"
        self.process = this_process()
        self._jobs: dict[str, StageJob] = {}

    @classmethod
    def of(cls, defn, source, echo=print) -> Lineage | None:
        settings = getattr(defn, "lineage", None)
        return cls(defn, source, settings, echo) if settings is not None else None

    def job(self, sd) -> StageJob:
        if sd.name not in self._jobs:
            def dataset(name: str) -> Dataset:
                try:
                    columns = tuple((c.name, c.kind) for c in self.source.layout(name).columns)
                except Exception:  # noqa: BLE001 - a topic not created yet: named without its schema
                    columns = ()
                return Dataset(name, columns)

            outputs = tuple(dataset(t) for t in sd.outputs)
            fields = {d.name: d.fields for d in outputs}
            lake = tuple(location_dataset(target.location, fields[target.topic])
                         for _name, target in sorted((getattr(self.defn, "lake", None) or {}).items())
                         if target.topic in fields)
            self._jobs[sd.name] = StageJob(
                namespace=self.settings.namespace or self.defn.name, pipeline=self.defn.name, stage=sd.name,
                ledger=str(Path(self.defn.source).resolve()), ledger_id=self.ledger_id,
                inputs=tuple(dataset(t) for t in sd.inputs), outputs=outputs,
                description=getattr(sd, "description", None),
                lookups=tuple(dataset(t) for t in getattr(sd, "lookups", None) or ()), lake=lake)
        return self._jobs[sd.name]

    def started(self, sd, run_id: str, logical_date: str | None = None) -> None:
        """Note, then send, the START of ``sd``'s run ``run_id``."""
        now = utc_now()
        with self.source.ledger.atomic() as conn:
            lineage_log.note_start_in_current_transaction(conn, lineage_log.OpenRun(
                run_id, self.defn.name, sd.name, now, self.process))
        self._send(start_event(self.job(sd), run_id, now, logical_date=logical_date))
        checkpoint("lineage:started")  # a test kills the runner here: the next run sends the FAIL

    def ended(self, sd, run_id: str, outcome=None) -> None:
        """Send, then note, the terminal event of ``sd``'s run ``run_id``: from its run-log row,
        else from ``outcome`` (the scheduler's StageOutcome, when the run left no row)."""
        self._finish(self.job(sd), run_id, outcome)

    def recover(self) -> int:
        """Send the FAIL (or the ending its run row says) of every run of this pipeline whose
        START was sent by a process that is gone (``util.liveness``); returns how many. A run
        started on another host is left alone unless its row says how it ended."""
        count = 0
        by_name = {sd.name: sd for sd in self.defn.stages}
        for run in lineage_log.open_runs(self.source.ledger.conn, self.defn.name):
            rows = read_runs(self.source.ledger.conn, run_id=run.run_id)
            row = rows[0] if rows else None
            finished = row is not None and row.get("status") not in (None, "running")
            state = process_state(run.process)
            if state == "alive" or (state == "unknown" and not finished):
                continue
            if run.stage not in by_name:  # a stage no longer in the file: its job as it was named
                sd = _Gone(run.stage)
            else:
                sd = by_name[run.stage]
            self._finish(self.job(sd), run.run_id)
            count += 1
        if count:
            self.echo(f"lineage: sent the ending of {count} earlier run(s) whose process did not")
        return count

    def _finish(self, job: StageJob, run_id: str, outcome=None) -> None:
        rows = read_runs(self.source.ledger.conn, run_id=run_id)
        row = rows[0] if rows else None
        if row is None and outcome is not None:
            row = {**(outcome.run or {}), "status": outcome.status, "error": outcome.error}
        event = end_event(job, run_id, utc_now(), row)
        self._send(event)
        with self.source.ledger.atomic() as conn:
            lineage_log.note_end_in_current_transaction(conn, run_id, event["eventType"])

    def _send(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, separators=(",", ":"), sort_keys=True)
        if self.settings.file is not None:
            try:
                append_line(self.settings.file, line)
            except OSError as exc:
                self.echo(f"lineage: could not append to {self.settings.file}: {exc.strerror or exc}")
        if self.settings.url is not None:
            problem = post(self.settings.url, line, self.settings.api_key_env, self.settings.timeout)
            if problem:
                self.echo(f"lineage: {problem}")
        if self.settings.transport == "openlineage":
            problem = emit_with_openlineage(event)
            if problem:
                self.echo(f"lineage: {problem}")


@dataclass(frozen=True)
class _Gone:
    name: str
    inputs: tuple = ()
    outputs: tuple = ()


def append_line(path: Path, line: str) -> None:
    """Append one line, whole, under an exclusive lock (several runs may share the file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def post(url: str, body: str, api_key_env: str | None, timeout: float) -> str | None:
    """POST one event; None when the server took it (2xx), else what went wrong, masked."""
    headers = {"Content-Type": "application/json"}
    token = os.environ.get(api_key_env) if api_key_env else None
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) checked
            response.read()
        return None
    except urllib.error.HTTPError as exc:
        return f"{redact_url(url)} answered {exc.code} {redact_and_cut(exc.reason, 200, [token])}"
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"could not send to {redact_url(url)}: {redact_and_cut(reason, 200, [token])}"


_CLIENT: list = []  # openlineage-python's client, made once per process from its own configuration


def emit_with_openlineage(event: dict[str, Any]) -> str | None:
    """Hand one event to openlineage-python's transport, configured as that library reads it
    (``openlineage.yml``, ``$OPENLINEAGE_CONFIG``, ``OPENLINEAGE_URL``/``OPENLINEAGE__TRANSPORT__*``:
    http, kafka, file, console, composite...). None when it took it, else what went wrong, masked.

    The event is the one the file and url transports send (built from the ledger); it goes to
    the client's transport as it is, without the client's own environment facets."""
    try:
        if not _CLIENT:
            from openlineage.client import OpenLineageClient

            _CLIENT.append(OpenLineageClient())
        transport = _CLIENT[0].transport
        if transport is None:
            return "openlineage-python has no transport configured (openlineage.yml or OPENLINEAGE_URL)"
        transport.emit(event)
        return None
    except Exception as exc:  # noqa: BLE001 - lineage never fails a run
        return f"openlineage-python could not send the event: {type(exc).__name__}: {redact_and_cut(exc, 200)}"

"""OpenLineage run events (spec 2-0-2) of a stage's runs, built from what the ledger holds.

A stage run is one OpenLineage run of the job ``<pipeline>.<stage>``: a START when it starts
and one of COMPLETE (succeeded, partial), FAIL (the run failed, or its process died: killed by
SIGKILL or the OOM killer, crashed, its host lost) or ABORT (stopped on purpose: Ctrl-C or
SIGTERM) when it ends. Its inputs and outputs are topics of
the ledger, named ``<topic>`` in the namespace ``sqlite:<ledger path>``, with the model's
fields as their schema facet; outputs carry the rows committed and the quality assertions
their suites checked; the lake tables that mirror an output topic (``[lake.NAME]``, written in
the same commit) are outputs too, named by their location as OpenLineage names files
(namespace ``file`` and the absolute path, or ``s3://bucket`` and the key); a FAIL carries the
run's error, masked as the run log keeps it.

The run id is a UUID (the spec's format) derived from the ledger's id and the run log's run
id, so every event of one run, sent by whichever process, carries the same one.

Nothing here sends anything (``pipelines.lineage`` does) or reads the ledger: events are
built from plain values, so the tests validate them against the spec's JSON schemas.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..ledger.consuming import INTERRUPTED, TERMINATED
from ..util.redact import redact_and_cut

SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
RUN_EVENT = SPEC + "#/$defs/RunEvent"
FACETS = "https://openlineage.io/spec/facets/"
SCHEMA_URLS = {
    "schema": FACETS + "1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
    "dataQualityAssertions": FACETS + "1-1-0/DataQualityAssertionsDatasetFacet.json"
                                      "#/$defs/DataQualityAssertionsDatasetFacet",
    "outputStatistics": FACETS + "1-0-2/OutputStatisticsOutputDatasetFacet.json"
                                 "#/$defs/OutputStatisticsOutputDatasetFacet",
    "inputStatistics": FACETS + "1-0-0/InputStatisticsInputDatasetFacet.json"
                                "#/$defs/InputStatisticsInputDatasetFacet",
    "errorMessage": FACETS + "1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
    "nominalTime": FACETS + "1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet",
    "processing_engine": FACETS + "1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
    "jobType": FACETS + "2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
    "documentation": FACETS + "1-1-0/DocumentationJobFacet.json#/$defs/DocumentationJobFacet",
}
ENDINGS = {"succeeded": "COMPLETE", "partial": "COMPLETE", "failed": "FAIL", "interrupted": "ABORT"}
STOPPED_ON_PURPOSE = (INTERRUPTED, TERMINATED)  # the errors an 'interrupted' run stopped by a person carries
KILLED = "the stage's process ended without finishing its run (killed: SIGKILL, the OOM killer, a lost host)"
ERROR_CHARS = 2000


def producer() -> str:
    """The URI of this producer (the package, at its version)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("minikafka-spark")
    except PackageNotFoundError:  # pragma: no cover - a source tree without its metadata
        v = "0"
    return f"https://pypi.org/project/minikafka-spark/{v}/"


@dataclass(frozen=True)
class Dataset:
    """A topic (or a lake table) as OpenLineage sees it: its name and its fields as (name, type);
    ``namespace`` None: the ledger's."""

    name: str
    fields: tuple[tuple[str, str], ...] = ()
    namespace: str | None = None


def location_dataset(location: str, fields: tuple[tuple[str, str], ...] = ()) -> Dataset:
    """A lake table at ``location`` named as OpenLineage names files: a local path is
    (``file``, the absolute path); ``scheme://authority/path`` is (``scheme://authority``, the path)."""
    from urllib.parse import urlsplit

    parts = urlsplit(location)
    if parts.scheme in ("", "file") or len(parts.scheme) == 1:  # a path (a Windows drive letter too)
        return Dataset(parts.path if parts.scheme == "file" else location, fields, "file")
    return Dataset(parts.path.lstrip("/") or "/", fields, f"{parts.scheme}://{parts.netloc}")


@dataclass(frozen=True)
class StageJob:
    """What every event of a stage's runs says about the job and its datasets."""

    namespace: str
    pipeline: str
    stage: str
    ledger: str  # the ledger file's absolute path: the datasets' namespace
    ledger_id: str
    inputs: tuple[Dataset, ...]
    outputs: tuple[Dataset, ...]
    description: str | None = None
    lookups: tuple[Dataset, ...] = field(default=())
    lake: tuple[Dataset, ...] = field(default=())  # lake tables mirroring an output, written in its commit

    @property
    def name(self) -> str:
        return f"{self.pipeline}.{self.stage}"

    @property
    def dataset_namespace(self) -> str:
        return f"sqlite:{self.ledger}"


def run_uuid(ledger_id: str, run_id: str) -> str:
    """The OpenLineage run id of the run log's ``run_id`` in the ledger ``ledger_id``."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"minikafka:{ledger_id}:{run_id}"))


def _facet(name: str, body: Mapping[str, Any], made_by: str) -> dict[str, Any]:
    return {"_producer": made_by, "_schemaURL": SCHEMA_URLS[name], **body}


def _dataset(job: StageJob, ds: Dataset, made_by: str, **extra: Any) -> dict[str, Any]:
    facets = {"schema": _facet("schema", {"fields": [{"name": n, "type": t, "ordinal_position": i}
                                                      for i, (n, t) in enumerate(ds.fields, 1)]}, made_by)}
    out = {"namespace": ds.namespace or job.dataset_namespace, "name": ds.name, "facets": facets}
    for key, value in extra.items():
        if value:
            out[key] = value
    return out


def _job(job: StageJob, made_by: str) -> dict[str, Any]:
    facets = {"jobType": _facet("jobType", {"processingType": "BATCH", "integration": "MINIKAFKA",
                                            "jobType": "STAGE"}, made_by)}
    if job.description:
        facets["documentation"] = _facet("documentation", {"description": job.description}, made_by)
    return {"namespace": job.namespace, "name": job.name, "facets": facets}


def _assertions(quality: Any, topic: str) -> list[dict[str, Any]]:
    suites = (quality.get("suites") or []) if isinstance(quality, Mapping) else []
    found = []
    for suite in suites:
        if suite.get("topic") != topic:
            continue
        for result in suite.get("results") or []:
            item = {"assertion": str(result.get("expectation", "")), "success": bool(result.get("success")),
                    "severity": "error" if suite.get("policy") == "fail" else "warn"}
            if result.get("column"):
                item["column"] = str(result["column"])
            found.append(item)
    return found


def start_event(job: StageJob, run_id: str, at: str, *, logical_date: str | None = None) -> dict[str, Any]:
    """The START of run ``run_id`` at ``at`` (ISO 8601, UTC)."""
    made_by = producer()
    facets: dict[str, Any] = {"processing_engine": _facet("processing_engine", _engine(), made_by)}
    if logical_date:
        facets["nominalTime"] = _facet("nominalTime", {"nominalStartTime": f"{logical_date}T00:00:00Z"}, made_by)
    return {
        "eventType": "START", "eventTime": at, "producer": made_by, "schemaURL": RUN_EVENT,
        "run": {"runId": run_uuid(job.ledger_id, run_id), "facets": facets},
        "job": _job(job, made_by),
        "inputs": [_dataset(job, d, made_by) for d in (*job.inputs, *job.lookups)],
        "outputs": [_dataset(job, d, made_by) for d in (*job.outputs, *job.lake)],
    }


def end_event(job: StageJob, run_id: str, at: str, run: Mapping[str, Any] | None) -> dict[str, Any]:
    """The terminal event of run ``run_id``, from its run-log row ``run`` (None, or a row still
    'running': the run's process died before it could finish it, a FAIL)."""
    made_by = producer()
    status = (run or {}).get("status")
    state = ENDINGS.get(status or "", "FAIL")
    if state == "ABORT" and (run or {}).get("error") not in STOPPED_ON_PURPOSE:
        state = "FAIL"  # interrupted because its process died, not because someone stopped it
    facets: dict[str, Any] = {}
    if state != "COMPLETE":
        message = (run or {}).get("error") if status in ENDINGS else None
        facets["errorMessage"] = _facet("errorMessage", {
            "message": redact_and_cut(message or KILLED, ERROR_CHARS), "programmingLanguage": "PYTHON"}, made_by)
    one_input = len(job.inputs) == 1
    one_output = len(job.outputs) == 1
    inputs = [_dataset(job, d, made_by, inputFacets=(
        {"inputStatistics": _facet("inputStatistics", {"rowCount": int(run.get("rows_in") or 0)}, made_by)}
        if run and one_input and state == "COMPLETE" else None)) for d in job.inputs]
    inputs += [_dataset(job, d, made_by) for d in job.lookups]
    outputs = []
    for d in job.outputs:
        ds = _dataset(job, d, made_by, outputFacets=(
            {"outputStatistics": _facet("outputStatistics", {"rowCount": int(run.get("rows_out") or 0)}, made_by)}
            if run and one_output and state == "COMPLETE" else None))
        checks = _assertions((run or {}).get("quality"), d.name)
        if checks:
            ds["facets"]["dataQualityAssertions"] = _facet("dataQualityAssertions", {"assertions": checks}, made_by)
        outputs.append(ds)
    outputs += [_dataset(job, d, made_by) for d in job.lake]
    return {
        "eventType": state, "eventTime": at, "producer": made_by, "schemaURL": RUN_EVENT,
        "run": {"runId": run_uuid(job.ledger_id, run_id), "facets": facets},
        "job": _job(job, made_by), "inputs": inputs, "outputs": outputs,
    }


def _engine() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        spark = version("pyspark")
    except PackageNotFoundError:  # pragma: no cover - the Python-only install
        spark = "none"
    try:
        ours = version("minikafka-spark")
    except PackageNotFoundError:  # pragma: no cover
        ours = "0"
    return {"version": spark, "name": "spark", "openlineageAdapterVersion": ours}


def fields_of(columns: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(n), str(t)) for n, t in columns)

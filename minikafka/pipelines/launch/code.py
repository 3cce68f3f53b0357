"""The project's code shipped with a run: executors on other hosts and the engine's Python workers import it."""

from __future__ import annotations

from pathlib import Path

from ..definition import PipelineDefinition, PipelineDefinitionError


def code_packages(defn: PipelineDefinition) -> list[str]:
    """Top-level packages executors must import: minikafka, the jobs' and the models' packages."""
    names = {"minikafka"}
    names.update(sd.job.split(".")[0] for sd in defn.stages)
    names.update(t.model_path.split(":")[0].split(".")[0] for t in defn.topics.values())
    return sorted(names)


def code_zip(defn: PipelineDefinition, directory: str | Path) -> Path:
    """Zip the Python sources of ``code_packages`` for --py-files (executors on other hosts)."""
    from ...util.codezip import zip_packages

    target = Path(directory) / f"minikafka-code-{defn.name}.zip"
    missing = zip_packages(code_packages(defn), target)
    if missing:
        raise PipelineDefinitionError(f"{defn.path}: cannot find package {missing[0]!r} to ship to the executors")
    return target

"""Design warnings: pipelines that run, but give wrong answers once data arrives over nights.

``design_warnings(pipeline)`` reads each stage's job source (without importing it) and
returns one warning ``CheckResult`` per finding, naming the tool that fixes it:

- ``stage NAME inputs``: a stage that joins several plain inputs. Each input frame holds only
  the rows new to the stage, so the reference side of the join is empty from the second run
  on; reference data belongs in ``lookups = [...]`` (read whole, never acked).
- ``stage NAME aggregate``: a stage whose job groups or aggregates (``groupBy``, ``agg``,
  ``rollup``, ``cube``...) and writes into a deduplicated topic. A late row's group is dropped
  there as a duplicate, and replaying the input changes nothing; the aggregate belongs in a
  keyed table (``[tables]``) whose touched groups the stage recomputes (``ctx.read_groups``).

``minikafka check`` prints them before it runs the stages, ``minikafka doctor`` lists them.
A job whose source cannot be found or parsed gets no warning here (``doctor``'s job check
reports a module that does not import).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from ..util.checks import WARN, CheckResult
from .definition import PipelineDefinition, StageDefinition

AGGREGATING = frozenset({"groupBy", "groupby", "agg", "rollup", "cube", "groupByKey", "pivot"})
LOOKUPS_PAGE = "docs/how-to/lookups.md"
AGGREGATES_PAGE = "docs/how-to/aggregates-with-late-data.md"


def job_source(job: str) -> tuple[Path, ast.Module] | None:
    """The file and parsed source of the job module ``job`` (dotted), or None when it cannot
    be found or parsed. Only its parent packages are imported, not the module itself."""
    try:
        spec = importlib.util.find_spec(job)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    path = Path(spec.origin)
    try:
        return path, ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _method_calls(tree: ast.Module) -> list[ast.Attribute]:
    return [node.func for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)]


def _is_text_join(call: ast.Attribute) -> bool:
    """``", ".join(...)``, ``os.path.join(...)``, ``sep.join``: a string's or a path's join."""
    owner = call.value
    if isinstance(owner, ast.Constant) and isinstance(owner.value, str):
        return True
    name = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
    return name in ("path", "posixpath", "sep", "os", "shlex")


def joins(tree: ast.Module) -> bool:
    """The source calls a DataFrame-like ``.join(...)``."""
    return any(call.attr == "join" and not _is_text_join(call) for call in _method_calls(tree))


def aggregations(tree: ast.Module) -> list[str]:
    """The grouping and aggregating methods the source calls, sorted (``["agg", "groupBy"]``)."""
    return sorted({call.attr for call in _method_calls(tree) if call.attr in AGGREGATING})


def _is_table(pipeline: PipelineDefinition, name: str) -> bool:
    topic = pipeline.topics.get(name)
    return bool(getattr(topic, "is_table", False))


def _stage_warnings(pipeline: PipelineDefinition, stage: StageDefinition) -> list[CheckResult]:
    found = job_source(stage.job)
    if found is None:
        return []
    path, tree = found
    out = []
    if len(stage.inputs) > 1 and joins(tree):
        out.append(CheckResult(
            f"stage {stage.name} inputs", WARN,
            f"joins {len(stage.inputs)} inputs ({', '.join(stage.inputs)}), and each input frame holds only the "
            "rows new to the stage: from the second run on a reference topic's frame is empty and the join "
            "finds nothing; declare reference data as lookups = [...] (read whole in the run's snapshot, never "
            f"acked), keep only the facts in inputs; see {LOOKUPS_PAGE}",
            {"job": stage.job, "file": str(path), "inputs": list(stage.inputs)}))
    methods = aggregations(tree)
    deduplicated = [t for t in stage.outputs
                    if not _is_table(pipeline, t) and t in pipeline.topics and pipeline.topics[t].dedup]
    if methods and deduplicated:
        out.append(CheckResult(
            f"stage {stage.name} aggregate", WARN,
            f"aggregates ({', '.join(methods)} in {path.name}) into {', '.join(deduplicated)}, deduplicated "
            f"topic(s): a late row's group is dropped as a duplicate and keeps its old value, and a replay "
            "changes nothing; write the aggregate into a keyed table ([tables], keyed by the group's columns) and "
            f"recompute the groups the new rows touch with ctx.read_groups; see {AGGREGATES_PAGE}",
            {"job": stage.job, "file": str(path), "methods": methods, "topics": deduplicated}))
    return out


def design_warnings(pipeline: PipelineDefinition, stage: str | None = None) -> list[CheckResult]:
    """The design warnings of every stage of ``pipeline`` (or of the stage named ``stage``)."""
    return [w for sd in pipeline.stages if stage is None or sd.name == stage for w in _stage_warnings(pipeline, sd)]

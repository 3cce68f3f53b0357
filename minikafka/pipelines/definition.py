"""Load and check a pipeline definition (TOML) before anything runs.

```toml
[pipeline]
name = "homelab"
source = "../data/homelab.sqlite"      # relative to this file
master = "local[2]"                    # default master URL (override with --master)

[spark]                                # settings for every stage
"spark.driver.memory" = "1g"
staging = "file:///mnt/shared/mk"      # staging URI every node sees (needed on a non-local master)

[topics."rss.items"]
model = "schemas.homelab:RssItem"      # module:Class
dedup = ["url"]
partitions = 4                         # optional; key = ["field"] routes rows by a stable hash

[[stages]]
name = "split_youtube"
job = "jobs.split_youtube"             # module exposing transform(df) or row_fn(model)
inputs = ["rss.items"]
outputs = ["youtube_items"]
strategy = "strict"                    # or best_effort
max_attempts = 3
partitions = [0, 1]                    # optional: consume only these topic partitions
expectations = []                      # suite files (data quality)
trigger = { rows = 1000 }              # minikafka watch: or { every = "5m" }, { every = "5m", fixed = true }
window = { rows = 100000 }             # a backlog is processed in chunks of N input rows, one commit each
[stages.spark]                         # settings for this stage only
```

The DAG comes from the topics: a stage runs after every stage that writes one of its
inputs. Every error names the file, the stage and the key.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import InvalidNameError, MinikafkaError, PipelineCycleError
from ..ledger.identifiers import validate_consumer_name, validate_topic_name
from ..util.dag import topological_order
from ..util.tomlfile import read_toml

STAGE_KEYS = {"name", "job", "inputs", "outputs", "consumer", "strategy", "max_attempts", "expectations",
              "spark", "partitions", "description", "trigger", "window"}
TRIGGER_KEYS = {"rows", "every", "fixed", "debounce"}
WINDOW_KEYS = {"rows"}
TOPIC_KEYS = {"model", "dedup", "description", "partitions", "key"}
TOP_KEYS = {"pipeline", "spark", "topics", "stages", "deliveries"}  # deliveries: see connectors/delivery.py


class PipelineDefinitionError(MinikafkaError, ValueError):
    """A pipeline file is invalid; the message names the file, stage and key."""


@dataclass
class TopicDefinition:
    name: str
    model_path: str
    dedup: tuple[str, ...]
    model: type[BaseModel]
    partitions: int | None = None
    key: tuple[str, ...] | None = None


@dataclass
class StageDefinition:
    name: str
    job: str
    inputs: list[str]
    outputs: list[str]
    consumer: str
    strategy: str = "strict"
    max_attempts: int = 3
    expectations: list[str] = field(default_factory=list)
    spark: dict[str, str] = field(default_factory=dict)
    partitions: int | None = None  # an integer: JDBC read partitions
    suites: list = field(default_factory=list)
    trigger: dict[str, Any] = field(default_factory=dict)  # rows | every [fixed] | debounce (seconds)
    window_rows: int | None = None
    topic_partitions: list[int] | None = None  # a list: the topic partitions this stage consumes

    def job_module(self):
        return importlib.import_module(self.job)

    def job_file(self) -> Path:
        return Path(self.job_module().__file__).resolve()


@dataclass
class PipelineDefinition:
    path: Path
    name: str
    source: Path
    master: str
    spark: dict[str, str]
    topics: dict[str, TopicDefinition]
    stages: list[StageDefinition]  # in DAG order
    staging: str | None = None  # [spark] staging: a URI every node sees

    def stage(self, name: str) -> StageDefinition:
        for s in self.stages:
            if s.name == name:
                return s
        raise PipelineDefinitionError(f"{self.path}: no stage named {name!r} (stages: {[s.name for s in self.stages]})")

    def downstream_of(self, name: str) -> list[str]:
        """``name`` and every stage that (transitively) reads what it writes, in DAG order."""
        reached, written = [name], set(self.stage(name).outputs)
        for s in self.stages:  # DAG order: a reader comes after every writer of its inputs
            if s.name != name and written & set(s.inputs):
                reached.append(s.name)
                written |= set(s.outputs)
        return [s.name for s in self.stages if s.name in reached]

    def edges(self) -> list[tuple[str, str]]:
        return [(i, o) for s in self.stages for i in s.inputs for o in s.outputs]


def _fail(path: Path, where: str, message: str) -> PipelineDefinitionError:
    return PipelineDefinitionError(f"{path}: {where}: {message}")


def _import_model(path: Path, where: str, spec: Any) -> type[BaseModel]:
    if not isinstance(spec, str) or ":" not in spec:
        raise _fail(path, where, f"model must be 'module:Class', got {spec!r}")
    module_name, _, cls_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _fail(path, where, f"cannot import model module {module_name!r}: {exc}") from exc
    model = getattr(module, cls_name, None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise _fail(path, where, f"{spec!r} is not a pydantic model")
    return model


def _str_list(path: Path, where: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise _fail(path, where, f"must be a non-empty list of names, got {value!r}")
    return value


def _settings(path: Path, where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _fail(path, where, "must be a table of Spark settings")
    return {str(k): str(v) for k, v in value.items()}


def load_pipeline(path: str | Path, *, check_jobs: bool = True) -> PipelineDefinition:
    """Parse and check a pipeline file; stages come back in DAG order.

    Raises:
        PipelineDefinitionError: unreadable TOML, unknown keys or topics, a missing model
            or job, duplicate stage names, a cycle (named).
    """
    path = Path(path)
    raw = read_toml(path, PipelineDefinitionError, "pipeline file")
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        raise _fail(path, "top level", f"unknown key(s) {unknown}; expected {sorted(TOP_KEYS)}")
    head = raw.get("pipeline", {})
    name = head.get("name", path.stem)
    if "source" not in head:
        raise _fail(path, "[pipeline]", "missing key 'source' (the SQLite ledger file)")
    source = (path.parent / head["source"]).resolve()
    master = head.get("master", "local[*]")
    spark = _settings(path, "[spark]", raw.get("spark", {}))
    staging = spark.pop("staging", None)
    if staging and "://" not in staging and staging != "local":
        staging = str((path.parent / staging).resolve())  # a plain path is relative to the pipeline file

    topics: dict[str, TopicDefinition] = {}
    for topic_name, spec in raw.get("topics", {}).items():
        where = f'[topics."{topic_name}"]'
        try:
            validate_topic_name(topic_name)
        except InvalidNameError as exc:
            raise _fail(path, where, str(exc)) from exc
        if not isinstance(spec, dict):
            raise _fail(path, where, "must be a table")
        bad = sorted(set(spec) - TOPIC_KEYS)
        if bad:
            raise _fail(path, where, f"unknown key(s) {bad}; expected {sorted(TOPIC_KEYS)}")
        if "model" not in spec:
            raise _fail(path, where, "missing key 'model' ('module:Class')")
        model = _import_model(path, where, spec["model"])
        dedup = tuple(spec.get("dedup", []))
        missing = [d for d in dedup if d not in model.model_fields]
        if missing:
            raise _fail(path, where, f"dedup field(s) {missing} are not fields of {spec['model']}")
        parts = spec.get("partitions")
        if parts is not None and (isinstance(parts, bool) or not isinstance(parts, int) or not 1 <= parts <= 4096):
            raise _fail(path, f"{where}, key 'partitions'", f"must be an integer from 1 to 4096, got {parts!r}")
        key = spec.get("key")
        if key is not None:
            key = tuple([key] if isinstance(key, str) else key)
            if not key or any(k not in model.model_fields for k in key):
                raise _fail(path, f"{where}, key 'key'", f"must name fields of {spec['model']}, got {list(key)!r}")
        topics[topic_name] = TopicDefinition(topic_name, spec["model"], dedup, model, parts, key)

    stages: list[StageDefinition] = []
    seen: set[str] = set()
    for i, spec in enumerate(raw.get("stages", [])):
        where = f"stage #{i + 1}"
        if not isinstance(spec, dict):
            raise _fail(path, where, "must be a table")
        if "name" not in spec:
            raise _fail(path, where, "missing key 'name'")
        stage_name = spec["name"]
        where = f"stage {stage_name!r}"
        try:
            validate_consumer_name(stage_name)
        except InvalidNameError as exc:
            raise _fail(path, where, f"key 'name': {exc}") from exc
        if stage_name in seen:
            raise _fail(path, where, "duplicate stage name")
        seen.add(stage_name)
        bad = sorted(set(spec) - STAGE_KEYS)
        if bad:
            raise _fail(path, where, f"unknown key(s) {bad}; expected {sorted(STAGE_KEYS)}")
        for key in ("job", "inputs", "outputs"):
            if key not in spec:
                raise _fail(path, where, f"missing key {key!r}")
        inputs = _str_list(path, f"{where}, key 'inputs'", spec["inputs"])
        outputs = _str_list(path, f"{where}, key 'outputs'", spec["outputs"])
        for key, names in (("inputs", inputs), ("outputs", outputs)):
            for t in names:
                if t not in topics:
                    raise _fail(path, f"{where}, key {key!r}", f"unknown topic {t!r} (declared: {sorted(topics)})")
        strategy = spec.get("strategy", "strict")
        if strategy not in ("strict", "best_effort"):
            raise _fail(path, f"{where}, key 'strategy'", f"must be 'strict' or 'best_effort', got {strategy!r}")
        attempts = spec.get("max_attempts", 3)
        if not isinstance(attempts, int) or attempts < 1:
            raise _fail(path, f"{where}, key 'max_attempts'", f"must be an integer >= 1, got {attempts!r}")
        stage = StageDefinition(
            name=stage_name, job=str(spec["job"]), inputs=inputs, outputs=outputs,
            consumer=spec.get("consumer", stage_name), strategy=strategy, max_attempts=attempts,
            expectations=[str((path.parent / e).resolve()) for e in spec.get("expectations", [])],
            spark=_settings(path, f"{where}, key 'spark'", spec.get("spark", {})),
            **_stage_partitions(path, where, spec.get("partitions"), inputs, topics),
            trigger=_trigger(path, where, spec.get("trigger", {})),
            window_rows=_window(path, where, spec.get("window")),
        )
        if check_jobs:
            _check_job(path, where, stage)
        if stage.expectations:
            stage.suites = _load_suites(path, where, stage, topics)
        stages.append(stage)
    if not stages:
        raise _fail(path, "[[stages]]", "no stages defined")

    by_name = {s.name: s for s in stages}
    edges = [(a.name, b.name) for a in stages for b in stages if set(a.outputs) & set(b.inputs)]
    try:
        order = topological_order([s.name for s in stages], edges)
    except PipelineCycleError as exc:
        raise PipelineDefinitionError(f"{path}: stages form a cycle: {str(exc).split(': ', 1)[1]}") from exc
    return PipelineDefinition(path.resolve(), name, source, master, spark, topics, [by_name[n] for n in order],
                              staging)


def _positive_int(path: Path, where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(path, where, f"must be a positive integer, got {value!r}")
    return value


def _trigger(path: Path, where: str, spec: Any) -> dict[str, Any]:
    """``trigger = { rows = N } | { every = "5m" [, fixed = true] }`` (+ ``debounce``), checked."""
    from ..util.duration import parse_duration

    where = f"{where}, key 'trigger'"
    if not isinstance(spec, dict):
        raise _fail(path, where, f"must be a table such as {{ rows = 1000 }} or {{ every = \"5m\" }}, got {spec!r}")
    unknown = sorted(set(spec) - TRIGGER_KEYS)
    if unknown:
        raise _fail(path, where, f"unknown trigger key(s) {unknown}; expected {sorted(TRIGGER_KEYS)}")
    out: dict[str, Any] = {}
    if "rows" in spec and "every" in spec:
        raise _fail(path, where, "give rows or every, not both")
    if "rows" in spec:
        out["rows"] = _positive_int(path, f"{where} 'rows'", spec["rows"])
    for key in ("every", "debounce"):
        if key in spec:
            try:
                out[key] = parse_duration(spec[key], what=key)
            except ValueError as exc:
                raise _fail(path, where, str(exc)) from exc
    if "fixed" in spec:
        if not isinstance(spec["fixed"], bool):
            raise _fail(path, f"{where} 'fixed'", f"must be true or false, got {spec['fixed']!r}")
        if spec["fixed"] and "every" not in spec:
            raise _fail(path, where, "fixed = true needs every = \"<duration>\"")
        out["fixed"] = spec["fixed"]
    return out


def _window(path: Path, where: str, spec: Any) -> int | None:
    """``window = { rows = N }``: process a backlog in chunks of N input rows."""
    if spec is None:
        return None
    where = f"{where}, key 'window'"
    if not isinstance(spec, dict):
        raise _fail(path, where, f"must be a table such as {{ rows = 100000 }}, got {spec!r}")
    unknown = sorted(set(spec) - WINDOW_KEYS)
    if unknown:
        raise _fail(path, where, f"unknown window key(s) {unknown}; expected {sorted(WINDOW_KEYS)}")
    if "rows" not in spec:
        raise _fail(path, where, "missing key 'rows'")
    return _positive_int(path, f"{where} 'rows'", spec["rows"])


def _stage_partitions(path: Path, where: str, value: Any, inputs: list[str],
                      topics: dict[str, TopicDefinition]) -> dict[str, Any]:
    """``partitions``: a list names the topic partitions the stage consumes; an integer keeps
    its older meaning, the number of JDBC read partitions."""
    if value is None:
        return {}
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return {"partitions": value}
    if not isinstance(value, list) or not value or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in value):
        raise _fail(path, f"{where}, key 'partitions'", f"must be a list of topic partitions like [0, 1], got {value!r}")
    for name in inputs:
        count = topics[name].partitions or 1
        beyond = [p for p in value if p >= count]
        if beyond and topics[name].partitions is not None:
            raise _fail(path, f"{where}, key 'partitions'",
                        f"topic {name!r} has partitions 0..{count - 1}; {beyond} do not exist")
    return {"topic_partitions": sorted(set(value))}


def _load_suites(path: Path, where: str, stage: StageDefinition, topics: dict[str, TopicDefinition]) -> list:
    from ..quality.suite import QualityError, load_suite  # great-expectations only when suites exist

    fields = {t: list(topics[t].model.model_fields) for t in stage.outputs}
    default = stage.outputs[0] if len(stage.outputs) == 1 else None
    suites = []
    for file in stage.expectations:
        try:
            suites.append(load_suite(file, fields=fields, topic=default))
        except QualityError as exc:
            raise _fail(path, f"{where}, key 'expectations'", str(exc)) from exc
    return suites


def _check_job(path: Path, where: str, stage: StageDefinition) -> None:
    try:
        module = stage.job_module()
    except ImportError as exc:
        raise _fail(path, f"{where}, key 'job'", f"cannot import job module {stage.job!r}: {exc}") from exc
    has_transform = callable(getattr(module, "transform", None))
    has_row_fn = callable(getattr(module, "row_fn", None))
    if has_transform == has_row_fn:
        raise _fail(path, f"{where}, key 'job'",
                    f"job module {stage.job!r} must define exactly one of transform(df) or row_fn(model)")
    if has_row_fn and (len(stage.inputs) != 1 or len(stage.outputs) != 1):
        raise _fail(path, where, "a row_fn job takes exactly one input and one output topic")

"""Load and check a pipeline definition (TOML) before anything runs.

```toml
[pipeline]
name = "homelab"
source = "../data/homelab.sqlite"      # relative to this file
master = "local[2]"                    # default master URL (override with --master)

[spark]                                # settings for every stage
"spark.driver.memory" = "1g"
staging = "file:///mnt/shared/mk"      # staging URI every node sees (needed on a non-local master)

[engine]                               # the warm engine (all optional; see docs/how-to/engines.md)
remote = "sc://127.0.0.1:15002"        # use this engine (minikafka serve elsewhere) instead of starting one
port = 15002                           # where minikafka serve listens
idle_timeout = "10m"                   # the engine run starts (or shares) stops after this long unused
max_parallel = 2                       # independent stages run at once on the engine

[topics."rss.items"]
model = "schemas.homelab:RssItem"      # module:Class
dedup = ["url"]
partitions = 4                         # optional; key = ["field"] routes rows by a stable hash
# limits 'minikafka health' checks (each optional):
freshness = "26h"
max_lag = 10000
max_quarantined = 100
ingest = "incoming/items/*.jsonl"      # minikafka nightly: the night's files (globs; JSONL, CSV, Parquet)
schema_changes = "evolve"              # a model that adds optional fields adds them in place (default "refuse")
unknown_fields = "quarantine"          # an incoming field the model lacks: "drop" (warned, default), "evolve"

[tables."feed_day"]                    # a keyed table: one current row per key; a stage output into it merges
model = "schemas.homelab:FeedDay"
key = ["feed", "day"]                  # required
merge = { items = "sum" }              # optional: field -> replace|first|sum|max|min|last (default replace)

[[stages]]
name = "split_youtube"
job = "jobs.split_youtube"             # module exposing transform(df) or row_fn(model)
inputs = ["rss.items"]
outputs = ["youtube_items"]
lookups = ["channels"]                 # optional: topics read whole beside the new rows, never acked
strategy = "strict"                    # or best_effort
max_attempts = 3
partitions = [0, 1]                    # optional: consume only these topic partitions
expectations = []                      # suite files (data quality)
trigger = { rows = 1000 }              # minikafka watch: or { every = "5m" }, { every = "5m", fixed = true }
window = { rows = 100000 }             # a backlog is processed in chunks of N input rows, one commit each
# limits 'minikafka health' checks (each optional):
freshness = "26h"
max_lag = 5000
max_quarantined_per_run = 50
[stages.spark]                         # settings for this stage only

[queues."rss.items:fetch"]             # a work queue's health limits ("topic:consumer", or "topic")
max_dead = 0
max_pending_age = "1h"

[lake.scored]                          # a lake table mirroring a topic (extra lake; docs/how-to/lake-tables.md)
format = "iceberg"                     # or "delta", or "parquet" (an incremental export)
topic = "rss.scored"
location = "../lake/scored"            # relative to this file, or an object-store URI
partition_by = ["day(published)"]      # columns, or year/month/day/hour(column)

[health]
backups = "../backups"                 # relative to this file
backup_freshness = "26h"
```

The DAG comes from the topics: a stage runs after every stage that writes one of its
inputs or lookups. Every error names the file, the stage and the key.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import (
    InvalidNameError,
    PipelineCycleError,
    PipelineDefinitionError,  # noqa: F401 (re-exported where it used to live)
)
from ..ledger.topics import validate_consumer_name, validate_topic_name
from ..util.dag import topological_order
from ..util.optional import install_hint
from ..util.redact import redact_url
from ..util.tomlfile import read_toml
from .schema import STAGE_KEYS, TOP_KEYS, TOPIC_KEYS, TRIGGER_KEYS, WINDOW_KEYS, check_shape

__all__ = ["STAGE_KEYS", "TOP_KEYS", "TOPIC_KEYS", "TRIGGER_KEYS", "WINDOW_KEYS", "PipelineDefinitionError",
           "load_pipeline"]


@dataclass
class TopicDefinition:
    name: str
    model_path: str
    dedup: tuple[str, ...]
    model: type[BaseModel]
    partitions: int | None = None
    key: tuple[str, ...] | None = None
    freshness: float | None = None  # seconds: a row appended within (health)
    max_lag: int | None = None  # rows pending for any one consumer (health)
    max_quarantined: int | None = None  # rows in its quarantine (health)
    ingest: tuple[str, ...] = ()  # globs of the files 'minikafka nightly' ingests, absolute
    schema_changes: str = "refuse"  # "evolve": a model that adds optional fields adds them in place
    unknown_fields: str = "drop"  # an incoming field the model lacks: drop (warned), quarantine, evolve
    table_key: tuple[str, ...] | None = None  # a [tables] entry: the key of its one current row per key
    merge: dict[str, str] = field(default_factory=dict)  # a [tables] entry: field -> merge function

    @property
    def is_table(self) -> bool:
        """Declared in ``[tables]``: a keyed table (a stage output into it is merged)."""
        return self.table_key is not None


@dataclass
class QueueRules:
    """Health limits of one queue (``[queues."topic:consumer"]``)."""

    name: str
    topic: str
    consumer: str
    max_dead: int | None = None
    max_pending_age: float | None = None  # seconds


@dataclass
class HealthSettings:
    """``[health]``: where snapshots go and how old the newest may be."""

    backups: Path | None = None
    backup_freshness: float | None = None  # seconds


@dataclass
class StageDefinition:
    name: str
    job: str
    inputs: list[str]
    outputs: list[str]
    consumer: str
    strategy: str = "strict"
    start: str = "earliest"  # where the stage's consumer starts when it is new (earliest | latest)
    max_attempts: int = 3
    expectations: list[str] = field(default_factory=list)
    spark: dict[str, str] = field(default_factory=dict)
    partitions: int | None = None  # an integer: JDBC read partitions
    suites: list = field(default_factory=list)
    trigger: dict[str, Any] = field(default_factory=dict)  # rows | every [fixed] | debounce (seconds)
    window_rows: int | None = None
    topic_partitions: list[int] | None = None  # a list: the topic partitions this stage consumes
    freshness: float | None = None  # seconds: a successful run within (health)
    max_lag: int | None = None  # rows pending for its consumer on its inputs (health)
    max_quarantined_per_run: int | None = None  # rows its latest run quarantined (health)
    pending_suites: Callable[[], list] | None = field(default=None, repr=False, compare=False)
    check_suites: Callable[[list], None] | None = field(default=None, repr=False, compare=False)
    lookups: list[str] = field(default_factory=list)  # topics read whole, in the plan's snapshot, never acked

    @property
    def reads(self) -> list[str]:
        """Every topic the stage reads: its inputs, then its lookups (what orders the DAG)."""
        return [*self.inputs, *self.lookups]

    def load_suites(self) -> list:
        """The stage's suites, ready to run: loaded now if the pipeline was loaded with
        ``suites=False``, and their arguments checked by great-expectations (which a plain
        ``load_pipeline`` leaves for here: it does not import great-expectations).

        Raises:
            PipelineDefinitionError: a suite is malformed or has invalid arguments (named with its stage).
        """
        if self.pending_suites is not None:
            self.suites, self.pending_suites = self.pending_suites(), None
        if self.check_suites is not None:
            self.check_suites(self.suites)
            self.check_suites = None
        return self.suites

    def job_module(self):
        return importlib.import_module(self.job)

    def job_file(self) -> Path:
        return Path(self.job_module().__file__).resolve()


DEFAULT_IDLE_TIMEOUT_S = 600.0  # see docs/how-to/engines.md: why ten minutes


@dataclass
class EngineSettings:
    """``[engine]``: the warm engine the pipeline's commands use (all optional).

    ``remote``: an engine already running (``sc://host:port``), used as is; ``host``/``port``:
    where ``minikafka serve`` listens; ``idle_timeout``: seconds an engine that ``run`` started
    stays up after its last use (one engine serves every pipeline of a user on a master: the
    last run's pipeline decides, ``spark.engines.idle_timeout_of``); ``max_parallel``: stages
    run at once on the engine.
    """

    remote: str | None = None
    host: str | None = None
    port: int | None = None
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S
    max_parallel: int | None = None


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
    queues: dict[str, QueueRules] = field(default_factory=dict)
    health: HealthSettings = field(default_factory=HealthSettings)
    engine: EngineSettings = field(default_factory=lambda: EngineSettings())
    lake: dict[str, Any] = field(default_factory=dict)  # [lake.<name>]: name -> ledger.lake.IcebergTarget
    lineage: Any = None  # lineage.LineageSettings: [lineage], where OpenLineage events go (None: nowhere)
    has_deliveries: bool = False  # the file has [[deliveries]] (checked at load)

    def stage(self, name: str) -> StageDefinition:
        for s in self.stages:
            if s.name == name:
                return s
        raise PipelineDefinitionError(f"{self.path}: no stage named {name!r} (stages: {[s.name for s in self.stages]})")

    def load_suites(self) -> None:
        """Load every stage's suites now (after ``load_pipeline(..., suites=False)``).

        Raises:
            PipelineDefinitionError: a suite file is malformed (named with its stage).
        """
        for s in self.stages:
            s.load_suites()

    def downstream_of(self, name: str) -> list[str]:
        """``name`` and every stage that (transitively) reads what it writes, in DAG order."""
        reached, written = [name], set(self.stage(name).outputs)
        for s in self.stages:  # DAG order: a reader comes after every writer of its inputs
            if s.name != name and written & set(s.reads):
                reached.append(s.name)
                written |= set(s.outputs)
        return [s.name for s in self.stages if s.name in reached]

    @property
    def tables(self) -> dict[str, TopicDefinition]:
        """The ``[tables]`` entries (they are in ``topics`` too: a table is a topic with a key)."""
        return {name: t for name, t in self.topics.items() if t.is_table}

    def edges(self) -> list[tuple[str, str]]:
        return [(i, o) for s in self.stages for i in s.inputs for o in s.outputs]

    def lookup_edges(self) -> list[tuple[str, str]]:
        """(lookup, output) of every stage's lookups: drawn dashed beside ``edges``."""
        return [(i, o) for s in self.stages for i in s.lookups for o in s.outputs]


def has_upstream(sd: StageDefinition, chosen: list[StageDefinition]) -> bool:
    """Another of the stages ``chosen`` writes one of ``sd``'s inputs or lookups."""
    return any(set(o.outputs) & set(sd.reads) for o in chosen if o is not sd)


def select_stages(defn: PipelineDefinition, *, stage: str | None = None, start: str | None = None) -> list[StageDefinition]:
    """The stages a run takes: only ``stage``, ``start`` and everything downstream of it, or all."""
    if stage and start:
        raise PipelineDefinitionError("use --stage or --from, not both")
    if stage:
        return [defn.stage(stage)]
    if start:
        defn.stage(start)
        names = set(defn.downstream_of(start))
        return [s for s in defn.stages if s.name in names]
    return list(defn.stages)


def _fail(path: Path, where: str, message: str) -> PipelineDefinitionError:
    return PipelineDefinitionError(f"{path}: {where}: {message}")


def _topic_path(name: str) -> str:
    return f'topics."{name}"'


def _table_path(name: str) -> str:
    return f'tables."{name}"'


def _stage_path(name: str) -> str:
    return f"stages.{name}"


def _import_model(path: Path, where: str, spec: str) -> type[BaseModel]:
    if ":" not in spec:
        raise _fail(path, where, f"expected a model as 'module:Class', got {spec!r}")
    module_name, _, cls_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _fail(path, where, f"cannot import model module {module_name!r}: {exc}") from exc
    model: Any = module
    owner = f"module {module_name}"
    for i, part in enumerate(cls_name.split(".")):
        if not hasattr(model, part):
            raise _fail(path, where, f"{owner} has no attribute {part!r}" + _did_you_mean(model, part))
        model = getattr(model, part)
        owner = f"{module_name}:{part}" if i == 0 else f"{owner}.{part}"
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise _fail(path, where, f"{spec!r} is not a pydantic model (it is {type(model).__name__} {model!r:.80})")
    return model


def _did_you_mean(owner: Any, name: str) -> str:
    """`` (did you mean 'Scored'?)`` for the closest pydantic model on ``owner``, or ''."""
    import difflib

    models = [n for n, v in vars(owner).items()
              if isinstance(v, type) and issubclass(v, BaseModel) and v is not BaseModel]
    close = difflib.get_close_matches(name, models, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _names(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _settings(value: dict[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (value or {}).items()}


def load_pipeline(path: str | Path, *, check_jobs: bool | str = True, suites: bool = True) -> PipelineDefinition:
    """Parse and check a pipeline file; stages come back in DAG order.

    ``check_jobs=False`` skips importing the job modules and ``suites=False`` loading the
    expectation suites: what commands that only read the ledger (health, doctor, backup)
    need is there without them. ``check_jobs="source"`` checks the job modules from their
    source, without importing them (nor pyspark, which they import): what commands that only
    show the pipeline (status, topics, plot) use. Neither imports great-expectations: with ``suites=True`` the
    suites are read and checked (columns, regexes, types, policies) without it, and its own
    check of each expectation's arguments waits for ``load_suites``, which every path that
    runs a suite calls (``status --pipeline`` stays under half a second).

    The file's shape is checked first against the schema in ``pipelines.schema``
    (every problem reported at once, each naming its key path, e.g.
    ``stages.summarize.expectations``); then what the values mean.

    ``suites=False`` leaves the expectation suites unread until ``load_suites`` (whose
    argument check imports great-expectations, about 1.5 s): ``run`` reads them only once a
    stage has rows to process, so a night with nothing new costs no great-expectations import.

    Raises:
        PipelineDefinitionError: unreadable TOML, a key of the wrong type, an unknown
            key, unknown topics, a missing model or job, duplicate stage names, a cycle
            (named).
    """
    path = Path(path)
    raw = read_toml(path, PipelineDefinitionError, "pipeline file")
    problems = check_shape(raw)
    if problems:
        raise PipelineDefinitionError("\n".join(f"{path}: {p}" for p in problems))
    head = raw["pipeline"]
    name = head.get("name", path.stem)
    source = (path.parent / head["source"]).resolve()
    master = head.get("master", "local[*]")
    spark = _settings(raw.get("spark"))
    staging = spark.pop("staging", None)
    if staging and "://" not in staging and staging != "local":
        staging = str((path.parent / staging).resolve())  # a plain path is relative to the pipeline file

    topics: dict[str, TopicDefinition] = {}
    for topic_name, spec in (raw.get("topics") or {}).items():
        where = _topic_path(topic_name)
        try:
            validate_topic_name(topic_name)
        except InvalidNameError as exc:
            raise _fail(path, where, str(exc)) from exc
        model = _import_model(path, f"{where}.model", spec["model"])
        dedup = tuple(spec.get("dedup") or ())
        missing = [d for d in dedup if d not in model.model_fields]
        if missing:
            raise _fail(path, f"{where}.dedup", f"dedup field(s) {missing} are not fields of {spec['model']}")
        parts = spec.get("partitions")
        if parts is not None and not 1 <= parts <= 4096:
            raise _fail(path, f"{where}.partitions", f"must be an integer from 1 to 4096, got {parts!r}")
        key = spec.get("key")
        if key is not None:
            key = tuple(_names(key))
            if not key or any(k not in model.model_fields for k in key):
                raise _fail(path, f"{where}.key", f"must name fields of {spec['model']}, got {list(key)!r}")
        topics[topic_name] = TopicDefinition(topic_name, spec["model"], dedup, model, parts, key,
                                             **_limits(path, where, spec, ("freshness", "max_lag", "max_quarantined")),
                                             schema_changes=spec.get("schema_changes") or "refuse",
                                             unknown_fields=_unknown_fields(path, where, spec, model))
        if spec.get("ingest") is not None:  # globs relative to the pipeline file
            topics[topic_name].ingest = tuple(str(path.parent.resolve() / g) for g in _names(spec["ingest"]))
    for table_name, spec in (raw.get("tables") or {}).items():
        topics[table_name] = _table(path, table_name, spec, topics)

    stages: list[StageDefinition] = []
    seen: set[str] = set()
    for spec in raw.get("stages") or []:
        stage_name = spec["name"]
        where = _stage_path(stage_name)
        try:
            validate_consumer_name(stage_name)
        except InvalidNameError as exc:
            raise _fail(path, f"{where}.name", str(exc)) from exc
        if stage_name in seen:
            raise _fail(path, where, "duplicate stage name")
        seen.add(stage_name)
        inputs, outputs = _names(spec["inputs"]), _names(spec["outputs"])
        for key, names in (("inputs", inputs), ("outputs", outputs)):
            if not names:
                raise _fail(path, f"{where}.{key}", "must name at least one topic")
            for t in names:
                if t not in topics:
                    raise _fail(path, f"{where}.{key}", f"unknown topic {t!r} (declared: {sorted(topics)})")
        lookups = _lookups(path, where, spec.get("lookups"), inputs, outputs, topics)
        strategy = spec.get("strategy", "strict")  # strategy, start, max_attempts: checked by the schema
        attempts = spec.get("max_attempts", 3)
        consumer = spec.get("consumer", stage_name)
        try:
            validate_consumer_name(consumer)
        except InvalidNameError as exc:
            raise _fail(path, f"{where}.consumer", str(exc)) from exc
        start = spec.get("start", "earliest")
        stage = StageDefinition(
            name=stage_name, job=spec["job"], inputs=inputs, outputs=outputs, lookups=lookups,
            consumer=consumer, strategy=strategy, start=start, max_attempts=attempts,
            expectations=[str((path.parent / e).resolve()) for e in spec.get("expectations") or []],
            spark=_settings(spec.get("spark")),
            **_stage_partitions(path, where, spec.get("partitions"), inputs, topics),
            trigger=_trigger(path, where, spec.get("trigger") or {}),
            window_rows=_window(path, where, spec.get("window")),
            **_limits(path, where, spec, ("freshness", "max_lag", "max_quarantined_per_run")),
        )
        if check_jobs:
            _check_job(path, where, stage, imports=check_jobs != "source")
        if stage.expectations and suites:  # checked without great-expectations; its own check: load_suites
            stage.suites = _load_suites(path, where, stage, topics, arguments=False)
            stage.check_suites = partial(_check_suite_arguments, path, where)
        elif stage.expectations:
            stage.pending_suites = partial(_load_suites, path, where, stage, topics)
        stages.append(stage)
    if not stages:
        raise _fail(path, "stages", "no stages defined (add [[stages]] tables)")
    _check_deliveries(path, raw.get("deliveries"))
    engine = _engine(path, raw.get("engine") or {})

    by_name = {s.name: s for s in stages}
    edges = [(a.name, b.name) for a in stages for b in stages if set(a.outputs) & set(b.reads)]
    try:
        order = topological_order([s.name for s in stages], edges)
    except PipelineCycleError as exc:
        raise PipelineDefinitionError(f"{path}: stages form a cycle: {str(exc).split(': ', 1)[1]}") from exc
    from .lineage import parse_lineage

    return PipelineDefinition(path.resolve(), name, source, master, spark, topics, [by_name[n] for n in order],
                              staging, _queues(path, raw.get("queues") or {}), _health(path, raw.get("health") or {}),
                              engine, _lake(path, raw.get("lake") or {}, topics),
                              parse_lineage(path, raw.get("lineage")), has_deliveries=bool(raw.get("deliveries")))


def _lake(path: Path, specs: dict[str, dict[str, Any]], topics: dict[str, TopicDefinition]) -> dict[str, Any]:
    """The ``[lake.<name>]`` tables as ``IcebergTarget``s or ``DeltaTarget``s (a relative location is
    relative to the file)."""
    from ..errors import LakeConfigError
    from ..ledger.lake import DeltaTarget, IcebergTarget, ParquetTarget

    out = {}
    for name, spec in specs.items():
        where = f"lake.{name}"
        if spec["topic"] not in topics:
            raise _fail(path, f"{where}.topic", f"unknown topic {spec['topic']!r} (declared: {sorted(topics)})")
        location = spec["location"]
        if "://" not in location:
            location = str((path.parent / location).resolve())
        parts = tuple(_names(spec.get("partition_by") or []))
        try:
            if spec["format"] == "delta":
                target = DeltaTarget(name, spec["topic"], location, parts)
            elif spec["format"] == "parquet":
                target = ParquetTarget(name, spec["topic"], location, parts)
            else:
                target = IcebergTarget(name, spec["topic"], location, parts,
                                       **({"namespace": spec["namespace"]} if spec.get("namespace") else {}))
        except LakeConfigError as exc:
            raise _fail(path, where, str(exc)) from exc
        model = topics[spec["topic"]].model
        for part in target.partition_by:
            column = part.rstrip(") ").split("(")[-1].strip()
            if column not in model.model_fields:
                raise _fail(path, f"{where}.partition_by", f"{column!r} is not a field of {topics[spec['topic']].model_path}")
        out[name] = target
    return out


def _table(path: Path, name: str, spec: dict[str, Any], topics: dict[str, TopicDefinition]) -> TopicDefinition:
    """A ``[tables."name"]`` entry, checked as ``Source.table`` would check it (``keyed.check_spec``)."""
    from ..errors import InvalidSettingError, MinikafkaError
    from ..ledger.topics import TopicLayout, keyed

    where = _table_path(name)
    if name in topics:
        raise _fail(path, where, f"{name!r} is declared twice: as {_topic_path(name)} and as {where}; "
                                 "a name is a topic or a keyed table, not both")
    try:
        validate_topic_name(name)
    except InvalidNameError as exc:
        raise _fail(path, where, str(exc)) from exc
    model = _import_model(path, f"{where}.model", spec["model"])
    key = tuple(_names(spec["key"]))
    try:
        layout = TopicLayout.for_model(name, model, None)
    except MinikafkaError as exc:  # a field name or type no topic can store
        raise _fail(path, f"{where}.model", str(exc)) from exc
    try:
        checked = keyed.check_spec(layout, key, dict(spec.get("merge") or {}))
    except InvalidSettingError as exc:
        raise _fail(path, f"{where}.{'merge' if 'merge' in str(exc) else 'key'}", str(exc)) from exc
    return TopicDefinition(name, spec["model"], (), model, table_key=checked.key, merge=dict(checked.merge),
                           **_limits(path, where, spec, ("freshness", "max_lag", "max_quarantined")))


def _lookups(path: Path, where: str, value: str | list[str] | None, inputs: list[str], outputs: list[str],
             topics: dict[str, Any]) -> list[str]:
    """``lookups``: declared topics (or tables), none also an input or an output of the stage."""
    names = _names(value) if value is not None else []
    where = f"{where}.lookups"
    for t in names:
        if t not in topics:
            raise _fail(path, where, f"unknown topic {t!r} (declared: {sorted(topics)})")
        if t in inputs or t in outputs:
            role = "inputs" if t in inputs else "outputs"
            raise _fail(path, where, f"{t!r} is also in {role}: a stage reads a topic as new rows (inputs) or "
                                     "whole (lookups), and never looks up what it writes")
    if len(set(names)) != len(names):
        raise _fail(path, where, f"names a topic twice: {names!r}")
    return names


def _limits(path: Path, where: str, spec: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The health limits among ``keys`` in ``spec``: durations in seconds, counts >= 0."""
    from ..util.duration import parse_duration

    out: dict[str, Any] = {}
    for key in keys:
        if key not in spec:
            continue
        value = spec[key]
        if key in ("freshness", "max_pending_age", "backup_freshness"):
            try:
                out[key] = parse_duration(value, what=key)
            except ValueError as exc:
                raise _fail(path, f"{where}.{key}", str(exc)) from exc
        elif value < 0:
            raise _fail(path, f"{where}.{key}", f"must be an integer >= 0, got {value!r}")
        else:
            out[key] = value
    return out


def _queues(path: Path, specs: dict[str, dict[str, Any]]) -> dict[str, QueueRules]:
    """``[queues."topic:consumer"]`` (or ``[queues.topic]`` for a consumer named like its topic)."""
    out = {}
    for label, spec in specs.items():
        where = f'queues."{label}"'
        topic, sep, consumer = label.partition(":")
        consumer = consumer if sep else topic
        try:
            validate_topic_name(topic)
            validate_consumer_name(consumer)
        except InvalidNameError as exc:
            raise _fail(path, where, f"a queue is named 'topic:consumer' (or 'topic'): {exc}") from exc
        out[label] = QueueRules(label, topic, consumer, **_limits(path, where, spec, ("max_dead", "max_pending_age")))
    return out


def _health(path: Path, spec: dict[str, Any]) -> HealthSettings:
    backups = spec.get("backups")
    return HealthSettings(backups=(path.parent / backups).resolve() if backups else None,
                          **_limits(path, "health", spec, ("backup_freshness",)))


def _check_deliveries(path: Path, specs: list[dict[str, Any]] | None) -> None:
    """``[[deliveries]]`` beside the stages: each checked as ``minikafka deliver`` would."""
    if not specs:  # the HTTP client is imported only when there is a delivery to check
        return
    from ..connectors.delivery import parse_delivery
    from ..errors import DeliveryConfigError

    for i, spec in enumerate(specs or []):
        try:
            parse_delivery(path, i, spec)
        except DeliveryConfigError as exc:
            raise PipelineDefinitionError(str(exc)) from exc


def _trigger(path: Path, where: str, spec: dict[str, Any]) -> dict[str, Any]:
    """``trigger = { rows = N } | { every = "5m" [, fixed = true] }`` (+ ``debounce``), checked."""
    from ..util.duration import parse_duration

    where = f"{where}.trigger"
    out: dict[str, Any] = {}
    if "rows" in spec and "every" in spec:
        raise _fail(path, where, "give rows or every, not both")
    if "rows" in spec:
        if spec["rows"] < 1:
            raise _fail(path, f"{where}.rows", f"must be a positive integer, got {spec['rows']!r}")
        out["rows"] = spec["rows"]
    for key in ("every", "debounce"):
        if key in spec:
            try:
                out[key] = parse_duration(spec[key], what=key)
            except ValueError as exc:
                raise _fail(path, f"{where}.{key}", str(exc)) from exc
    if "fixed" in spec:
        if spec["fixed"] and "every" not in spec:
            raise _fail(path, where, "fixed = true needs every = \"<duration>\"")
        out["fixed"] = spec["fixed"]
    return out


def _engine(path: Path, spec: dict[str, Any]) -> EngineSettings:
    """``[engine]``, checked: an sc:// URL, a port, a duration, a positive max_parallel."""
    from ..util.duration import parse_duration

    out = EngineSettings(remote=spec.get("remote"), host=spec.get("host"), port=spec.get("port"),
                         max_parallel=spec.get("max_parallel"))
    if out.remote is not None and not out.remote.startswith("sc://"):
        raise _fail(path, "engine.remote", f"must be a Spark Connect URL like \"sc://127.0.0.1:15002\", got {redact_url(out.remote)!r}")
    if out.port is not None and not 0 <= out.port <= 65535:
        raise _fail(path, "engine.port", f"must be a port from 0 to 65535, got {out.port!r}")
    if out.max_parallel is not None and out.max_parallel < 1:
        raise _fail(path, "engine.max_parallel", f"must be an integer >= 1, got {out.max_parallel!r}")
    if "idle_timeout" in spec:
        try:
            out.idle_timeout = parse_duration(spec["idle_timeout"], what="idle_timeout", zero=True)
        except ValueError as exc:
            raise _fail(path, "engine.idle_timeout", str(exc)) from exc
    return out


def _window(path: Path, where: str, spec: dict[str, Any] | None) -> int | None:
    """``window = { rows = N }``: process a backlog in chunks of N input rows."""
    if spec is None:
        return None
    if spec["rows"] < 1:
        raise _fail(path, f"{where}.window.rows", f"must be a positive integer, got {spec['rows']!r}")
    return spec["rows"]


def _unknown_fields(path: Path, where: str, spec: dict, model: type[BaseModel]) -> str:
    """``unknown_fields``: "evolve" keeps an incoming field the model lacks, which only a model
    that takes extra fields (``extra="allow"``) can."""
    policy = spec.get("unknown_fields") or "drop"
    if policy == "evolve" and model.model_config.get("extra") != "allow":
        raise _fail(path, f"{where}.unknown_fields", f'"evolve" needs a model with extra="allow" ({spec["model"]} '
                    'drops unknown fields): add the field to the model and run minikafka evolve, or use "drop" or '
                    '"quarantine"')
    return policy


def _stage_partitions(path: Path, where: str, value: int | list[int] | None, inputs: list[str],
                      topics: dict[str, TopicDefinition]) -> dict[str, Any]:
    """``partitions``: a list names the topic partitions the stage consumes; an integer keeps
    its older meaning, the number of JDBC read partitions."""
    where = f"{where}.partitions"
    if value is None:
        return {}
    if isinstance(value, int):
        if value < 1:
            raise _fail(path, where, f"must be a list of topic partitions like [0, 1] or a positive integer "
                                     f"(JDBC read partitions), got {value!r}")
        return {"partitions": value}
    if not value or any(p < 0 for p in value):
        raise _fail(path, where, f"must be a list of topic partitions like [0, 1], got {value!r}")
    for name in inputs:
        count = topics[name].partitions or 1
        beyond = [p for p in value if p >= count]
        if beyond and topics[name].partitions is not None:
            raise _fail(path, where, f"topic {name!r} has partitions 0..{count - 1}; {beyond} do not exist")
    return {"topic_partitions": sorted(set(value))}


def _job_names(module_name: str) -> set[str] | None:
    """The names a job module binds at its top level (functions, classes, assignments, imports),
    read from its source; None when the source cannot tell them (the module is imported then,
    which also gives a missing module its usual error)."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.has_location or not (spec.origin or "").endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(spec.origin).read_bytes(), spec.origin)
    except (OSError, SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif _main_guard(node) or isinstance(node, (ast.Expr, ast.Pass)):
            continue  # if __name__ == "__main__": runs only as a script
        else:
            return None  # if/try/with/for at the top level: what it binds depends on running it
    if "__getattr__" in names:
        return None
    return names


def _main_guard(node) -> bool:
    import ast

    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and not node.orelse and isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def _load_suites(path: Path, where: str, stage: StageDefinition, topics: dict[str, TopicDefinition], *,
                 arguments: bool = True) -> list:
    """The stage's suites; ``arguments`` False leaves great-expectations' own check of the
    arguments (and its import) for ``_check_suite_arguments``."""
    from ..quality.suite import QualityError, load_suite

    fields = {t: list(topics[t].model.model_fields) for t in stage.outputs}
    default = stage.outputs[0] if len(stage.outputs) == 1 else None
    suites = []
    for file in stage.expectations:
        try:
            suites.append(load_suite(file, fields=fields, topic=default, arguments=arguments))
        except QualityError as exc:
            raise _fail(path, f"{where}.expectations", str(exc)) from exc
    return suites


def _check_suite_arguments(path: Path, where: str, suites: list) -> None:
    from ..quality.suite import QualityError, check_arguments  # imports great-expectations

    for suite in suites:
        try:
            check_arguments(suite)
        except QualityError as exc:
            raise _fail(path, f"{where}.expectations", str(exc)) from exc


def _check_job(path: Path, where: str, stage: StageDefinition, *, imports: bool = True) -> None:
    """The job module exists and defines exactly one of transform or row_fn, fit for the stage.

    ``imports`` False: read from the module's source (its top-level definitions and imports),
    without importing it and what it imports (pyspark); imported only when the source does not
    tell (no source file, a star import, a module ``__getattr__``, a syntax error).
    """
    names = None if imports else _job_names(stage.job)
    if names is not None:
        has_transform, has_row_fn = "transform" in names, "row_fn" in names
    else:
        try:
            module = stage.job_module()
        except ImportError as exc:
            raise _fail(path, f"{where}.job",
                        f"cannot import job module {stage.job!r}: {exc}{install_hint(exc)}") from exc
        has_transform = callable(getattr(module, "transform", None))
        has_row_fn = callable(getattr(module, "row_fn", None))
    if has_transform == has_row_fn:
        raise _fail(path, f"{where}.job",
                    f"job module {stage.job!r} must define exactly one of transform(df) or row_fn(model)")
    if has_row_fn and (len(stage.inputs) != 1 or len(stage.outputs) != 1):
        raise _fail(path, where, "a row_fn job takes exactly one input and one output topic")
    if has_row_fn and stage.lookups:
        raise _fail(path, f"{where}.lookups", "a row_fn job cannot take lookups: define transform(frames), "
                                              "which receives {topic: DataFrame} with the lookups")

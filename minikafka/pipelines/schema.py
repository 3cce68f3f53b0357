"""The shape of a pipeline file as pydantic models: every key, its type, nothing else.

``check_shape(raw)`` validates the parsed TOML before any value is used and returns one
message per problem, each naming the key path (``stages.summarize.expectations``,
``topics."rss.items".dedup``): a wrong type ("expected a list of field names, got the
string "url""), a missing key, an unknown key (with "did you mean" when one is close).
What a value means (a known topic, an importable job, a field of the model) is checked
afterwards by ``definition.load_pipeline``.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from ..util.strategy import STRATEGIES, Strategy

Scalar = StrictStr | StrictInt | StrictFloat | StrictBool
StrList = Annotated[list[StrictStr], Field(min_length=1)]
Start = Literal["earliest", "latest"]  # where a new consumer starts
NamesOrName = StrictStr | StrList  # inputs/outputs/key: one name or a list of them
Duration = StrictStr | StrictInt | StrictFloat | dict[str, StrictInt | StrictFloat]  # "5m", seconds, {minutes = 5}


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class PipelineHead(_Table):
    name: StrictStr | None = None
    source: StrictStr
    master: StrictStr | None = None
    description: StrictStr | None = None


class TopicSpec(_Table):
    model: StrictStr
    dedup: list[StrictStr] | None = None
    partitions: StrictInt | None = None
    key: NamesOrName | None = None
    description: StrictStr | None = None
    freshness: Duration | None = None
    max_lag: StrictInt | None = None
    max_quarantined: StrictInt | None = None
    ingest: NamesOrName | None = None  # minikafka nightly: the night's files, globs relative to the pipeline file
    schema_changes: Literal["refuse", "evolve"] | None = None  # a model that adds fields: refused or added in place
    unknown_fields: Literal["drop", "quarantine", "evolve"] | None = None  # an incoming field the model lacks


class TableSpec(_Table):
    """``[tables."name"]``: a keyed table (one current row per key, upserts)."""

    model: StrictStr
    key: NamesOrName
    merge: dict[str, StrictStr] | None = None
    description: StrictStr | None = None
    freshness: Duration | None = None
    max_lag: StrictInt | None = None
    max_quarantined: StrictInt | None = None


class TriggerSpec(_Table):
    rows: StrictInt | None = None
    every: Duration | None = None
    fixed: StrictBool | None = None
    debounce: Duration | None = None


class WindowSpec(_Table):
    rows: StrictInt


class StageSpec(_Table):
    name: StrictStr
    job: StrictStr
    inputs: NamesOrName
    outputs: NamesOrName
    lookups: NamesOrName | None = None
    consumer: StrictStr | None = None
    start: Start | None = None
    strategy: Strategy | None = None
    max_attempts: Annotated[StrictInt, Field(ge=1)] | None = None
    expectations: list[StrictStr] | None = None
    spark: dict[str, Scalar] | None = None
    partitions: StrictInt | list[StrictInt] | None = None
    description: StrictStr | None = None
    trigger: TriggerSpec | None = None
    window: WindowSpec | None = None
    freshness: Duration | None = None
    max_lag: StrictInt | None = None
    max_quarantined_per_run: StrictInt | None = None


class QueueSpec(_Table):
    max_dead: StrictInt | None = None
    max_pending_age: Duration | None = None
    description: StrictStr | None = None


class HealthSpec(_Table):
    backups: StrictStr | None = None
    backup_freshness: Duration | None = None


class EngineSpec(_Table):
    remote: StrictStr | None = None
    host: StrictStr | None = None
    port: StrictInt | None = None
    idle_timeout: Duration | None = None
    max_parallel: StrictInt | None = None


class LakeSpec(_Table):
    format: Literal["iceberg", "delta", "parquet"]
    topic: StrictStr
    location: StrictStr
    partition_by: NamesOrName | None = None
    namespace: StrictStr | None = None
    description: StrictStr | None = None


class LineageSpec(_Table):
    namespace: StrictStr | None = None
    file: StrictStr | None = None
    url: StrictStr | None = None
    api_key_env: StrictStr | None = None
    timeout: StrictInt | StrictFloat | None = None
    transport: StrictStr | None = None


class PipelineFile(_Table):
    pipeline: PipelineHead
    spark: dict[str, Scalar] | None = None
    engine: EngineSpec | None = None
    topics: dict[str, TopicSpec] | None = None
    tables: dict[str, TableSpec] | None = None
    stages: list[StageSpec] | None = None
    deliveries: list[dict[str, Any]] | None = None  # each checked by connectors.delivery.parse_delivery
    queues: dict[str, QueueSpec] | None = None
    health: HealthSpec | None = None
    lake: dict[str, LakeSpec] | None = None
    lineage: LineageSpec | None = None


STAGE_KEYS = set(StageSpec.model_fields)
TOPIC_KEYS = set(TopicSpec.model_fields)
TABLE_KEYS = set(TableSpec.model_fields)
TOP_KEYS = set(PipelineFile.model_fields)
ENGINE_KEYS = set(EngineSpec.model_fields)
TRIGGER_KEYS = set(TriggerSpec.model_fields)
WINDOW_KEYS = set(WindowSpec.model_fields)
QUEUE_KEYS = set(QueueSpec.model_fields)
HEALTH_KEYS = set(HealthSpec.model_fields)
LINEAGE_KEYS = set(LineageSpec.model_fields)

# what each key expects, in words (by the key's name within its table)
EXPECTED = {
    ("", "pipeline"): 'a table: [pipeline] with source = "ledger.sqlite"',
    ("", "spark"): 'a table of Spark settings: [spark] with "spark.driver.memory" = "1g"',
    ("", "topics"): 'a table of topics: [topics."rss.items"] with model and dedup',
    ("", "stages"): "an array of tables: [[stages]] with name, job, inputs and outputs",
    ("", "deliveries"): "an array of tables: [[deliveries]] with name, topic and endpoint",
    ("", "engine"): 'a table: [engine] with remote = "sc://host:15002" or idle_timeout = "10m"',
    ("engine", "remote"): 'an engine URL as a string, e.g. "sc://127.0.0.1:15002"',
    ("engine", "host"): 'the address minikafka serve listens on, e.g. "127.0.0.1"',
    ("engine", "port"): "the port minikafka serve listens on (an integer)",
    ("engine", "idle_timeout"): 'a duration such as "10m" (or seconds); 0 stops the engine after the run',
    ("engine", "max_parallel"): "how many independent stages run at once (an integer >= 1)",
    ("", "queues"): 'a table of queues: [queues."jobs:workers"] with max_dead and max_pending_age',
    ("", "health"): 'a table: [health] with backups = "../backups" and backup_freshness = "26h"',
    ("", "lineage"): 'a table: [lineage] with file = "lineage.jsonl" or url = "http://host:5000/api/v1/lineage"',
    ("lineage", "namespace"): "the OpenLineage namespace of the pipeline's jobs (a string)",
    ("lineage", "file"): 'a JSON-lines file the events are appended to, e.g. "../lineage/events.jsonl"',
    ("lineage", "url"): 'an OpenLineage HTTP endpoint, e.g. "http://127.0.0.1:5000/api/v1/lineage"',
    ("lineage", "api_key_env"): 'the name of the environment variable holding a bearer token, e.g. "LINEAGE_API_KEY"',
    ("lineage", "timeout"): "seconds each POST may take (a number)",
    ("lineage", "transport"): '"openlineage": also hand each event to openlineage-python\'s configured transport',
    ("pipeline", "name"): "a name (a string)",
    ("pipeline", "source"): 'the SQLite ledger\'s path as a string, e.g. "../data/homelab.sqlite"',
    ("pipeline", "master"): 'a Spark master URL as a string, e.g. "local[2]" or "spark://host:7077"',
    ("pipeline", "description"): "a string",
    ("spark", None): "a Spark setting's value (a string, number or boolean)",
    ("topics", None): 'a table with model = "module:Class" and dedup = ["field"]',
    ("", "tables"): 'a table of keyed tables: [tables."carrier_day"] with model and key',
    ("tables", None): 'a table with model = "module:Class" and key = ["field"]',
    ("table", "model"): 'a model as a string "module:Class"',
    ("table", "key"): 'a field name or a list of field names, e.g. ["carrier", "day"]',
    ("table", "merge"): 'a table of field = merge function, e.g. { flights = "sum" } '
                        '(replace, first, sum, max, min, last)',
    ("table", "description"): "a string",
    ("table", "freshness"): 'a duration such as "26h": a version written within it',
    ("table", "max_lag"): "an integer: versions pending for any one consumer of the table",
    ("table", "max_quarantined"): "an integer: rows in the table's quarantine",
    ("topic", "model"): 'a model as a string "module:Class"',
    ("topic", "dedup"): 'a list of field names, e.g. ["url"]',
    ("topic", "partitions"): "a number of partitions (an integer)",
    ("topic", "key"): 'a field name or a list of field names, e.g. ["url"]',
    ("topic", "description"): "a string",
    ("topic", "freshness"): 'a duration such as "26h": a row appended within it',
    ("topic", "max_lag"): "an integer: rows pending for any one consumer of the topic",
    ("topic", "max_quarantined"): "an integer: rows in the topic's quarantine",
    ("topic", "ingest"): 'a glob or a list of globs relative to the pipeline file, e.g. "incoming/items/*.jsonl": '
                         "the files 'minikafka nightly' ingests (JSONL, CSV, Parquet; each once)",
    ("topic", "schema_changes"): '"evolve" (a model that adds optional fields adds them in place) or "refuse" '
                                 '(the default)',
    ("topic", "unknown_fields"): '"drop" (with a warning, the default), "quarantine" or "evolve" (a model with '
                                 'extra="allow")',
    ("stages", None): "a table with name, job, inputs and outputs",
    ("stage", "name"): "a stage name (a string)",
    ("stage", "job"): 'a job module as a string, e.g. "jobs.score"',
    ("stage", "inputs"): 'a list of topic names, e.g. ["rss.items"]',
    ("stage", "outputs"): 'a list of topic names, e.g. ["rss.scored"]',
    ("stage", "lookups"): 'a list of topic or table names read whole (never acked), e.g. ["airlines"]',
    ("stage", "consumer"): "a consumer name (a string)",
    ("stage", "start"): "'earliest' (a new consumer sees every row) or 'latest' (only rows appended from then on)",
    ("stage", "strategy"): " or ".join(repr(s) for s in STRATEGIES),
    ("stage", "max_attempts"): "an integer >= 1",
    ("stage", "expectations"): 'a list of suite files, e.g. ["quality/scored.toml"]',
    ("stage", "spark"): 'a table of Spark settings, e.g. { "spark.executor.memory" = "2g" }',
    ("stage", "partitions"): "a list of topic partitions like [0, 1] (or an integer: JDBC read partitions)",
    ("stage", "description"): "a string",
    ("stage", "trigger"): 'a table such as { rows = 1000 } or { every = "5m" }',
    ("stage", "window"): "a table such as { rows = 100000 }",
    ("stage", "freshness"): 'a duration such as "26h": a successful run within it',
    ("stage", "max_lag"): "an integer: rows pending for the stage on its inputs",
    ("stage", "max_quarantined_per_run"): "an integer: rows its latest run quarantined",
    ("queues", None): "a table with max_dead and max_pending_age",
    ("queue", "max_dead"): "an integer: jobs in the dead letter",
    ("queue", "max_pending_age"): 'a duration such as "1h": the oldest waiting job\'s age',
    ("queue", "description"): "a string",
    ("health", "backups"): 'the directory \'minikafka backup\' writes snapshots to, e.g. "../backups"',
    ("health", "backup_freshness"): 'a duration such as "26h": the newest snapshot is at most this old '
                                    '(doctor: default the longest stage freshness)',
    ("trigger", "rows"): "a positive integer",
    ("trigger", "every"): 'a duration such as "5m" (or seconds)',
    ("trigger", "debounce"): 'a duration such as "10s" (or seconds)',
    ("trigger", "fixed"): "true or false",
    ("window", "rows"): "a positive integer",
    ("deliveries", None): "a table with name, topic and endpoint",
    ("", "lake"): 'a table of lake tables: [lake.scored] with format = "iceberg", topic and location',
    ("lake", None): "a table with format, topic and location",
    ("lake", "format"): '"iceberg" (an Iceberg table whose catalog lives in the ledger) or "delta" (delta-rs, '
                        'an app transaction checked before each write) or "parquet" (an incremental, '
                        'partitioned export)',
    ("lake", "topic"): "the topic the table mirrors (a topic of this file)",
    ("lake", "location"): "the table's directory as a string",
    ("lake", "partition_by"): 'a list of partition fields, e.g. ["day(published)"]',
    ("lake", "namespace"): 'the catalog namespace (default "minikafka")',
    ("lake", "description"): "a string",
}


def describe(value: Any) -> str:
    """A value as the user wrote it in TOML: ``the string "url"``, ``the number 5``, ``a table``."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f'the string "{value}"' if len(value) <= 60 else f'the string "{value[:57]}..."'
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, dict):
        return "a table" + (f" with keys {sorted(value)}" if value else " (empty)")
    if isinstance(value, list):
        return "an empty list" if not value else f"the list {value!r}"[:80]
    return f"a {type(value).__name__} ({value!r})"


def _quote(name: str) -> str:
    return f'"{name}"' if not name.replace("_", "").replace("-", "").isalnum() else name


class _Walk:
    """Map a pydantic error location to (key path, table kind, key, raw value)."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw

    def resolve(self, loc: tuple) -> tuple[list[str], str, str | None, Any, int]:
        parts: list[str] = []
        value: Any = self.raw
        kind, key = "", None
        depth = 0

        def step(k) -> None:
            nonlocal value, depth
            depth += 1
            value = value.get(k) if isinstance(value, dict) else (
                value[k] if isinstance(value, list) and isinstance(k, int) and k < len(value) else None)

        if not loc:
            return parts, kind, key, value, depth
        top = loc[0]
        key = top
        step(top)
        parts.append(str(top))
        if len(loc) == 1 or top not in ("pipeline", "spark", "engine", "health", "lineage", "topics", "tables",
                                        "queues", "stages", "deliveries", "lake"):
            return parts, "", key, value, depth
        if top in ("pipeline", "spark", "engine", "health", "lineage"):
            sub = loc[1]
            step(sub)
            parts.append(_quote(str(sub)))
            return parts, top, (None if top == "spark" else sub), value, depth
        # a named entry: topics."rss.items", stages.<name> (or stages[3]), deliveries[1]
        entry = loc[1]
        step(entry)
        if isinstance(entry, int):
            name = value.get("name") if isinstance(value, dict) else None
            parts[-1] = f"{top}.{_quote(name)}" if isinstance(name, str) and name and top == "stages" \
                else f"{top}[{entry + 1}]"
        else:
            parts.append(_quote(str(entry)))
        if len(loc) == 2 or top == "deliveries":
            return parts, top, None, value, depth
        field = loc[2]
        if not isinstance(field, str):
            return parts, top, None, value, depth
        step(field)
        parts.append(field)
        kind = {"topics": "topic", "tables": "table", "queues": "queue", "lake": "lake"}.get(top, "stage")
        if kind == "stage" and field in ("trigger", "window") and len(loc) > 3 and isinstance(value, dict) \
                and isinstance(loc[3], str) and loc[3] in value:
            step(loc[3])
            parts.append(loc[3])
            return parts, field, loc[3], value, depth
        return parts, kind, field, value, depth


def _table_keys(kind: str) -> set[str]:
    return {"": TOP_KEYS, "pipeline": set(PipelineHead.model_fields), "topic": TOPIC_KEYS, "table": TABLE_KEYS,
            "stage": STAGE_KEYS,
            "engine": ENGINE_KEYS, "trigger": TRIGGER_KEYS, "window": WINDOW_KEYS, "queue": QUEUE_KEYS,
            "health": HEALTH_KEYS, "lake": set(LakeSpec.model_fields), "lineage": LINEAGE_KEYS}.get(kind, set())


def _kind_of(loc: tuple) -> str:
    """The kind of table an unknown key ``loc[-1]`` was found in."""
    inner = loc[:-1]
    if not inner:
        return ""
    if inner in (("pipeline",), ("health",), ("engine",), ("lineage",)):
        return inner[0]
    if inner[0] == "topics" and len(inner) == 2:
        return "topic"
    if inner[0] == "queues" and len(inner) == 2:
        return "queue"
    if inner[0] == "lake" and len(inner) == 2:
        return "lake"
    if inner[0] == "tables" and len(inner) == 2:
        return "table"
    if inner[0] == "stages" and len(inner) == 2:
        return "stage"
    if inner[0] == "stages" and len(inner) == 3 and inner[2] in ("trigger", "window"):
        return str(inner[2])
    return "?"


def unknown_key_message(key: str, known: set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    if close:
        return f"unknown key {key!r} (did you mean {close[0]!r}?)"
    return f"unknown key {key!r}; expected one of {sorted(known)}"


def check_shape(raw: dict[str, Any]) -> list[str]:
    """Every shape problem of a parsed pipeline file, as ``"<key path>: <message>"`` lines."""
    try:
        PipelineFile.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
    else:
        return []
    walk = _Walk(raw)
    out: dict[str, str] = {}
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            parts, _, _, _, depth = walk.resolve(loc[:-1]) if len(loc) > 1 else ([], "", None, None, 0)
            where = ".".join(parts) or "top level"
            message = unknown_key_message(str(loc[-1]), _table_keys(_kind_of(loc)))
            out.setdefault(f"{where}.{loc[-1]}", f"{where}: {message}")
            continue
        if err["type"] == "missing" and len(loc) >= 1:
            parts, _, _, _, _ = walk.resolve(loc[:-1]) if len(loc) > 1 else ([], "", None, None, 0)
            where = ".".join(parts) or "top level"
            kind = _kind_of(loc)
            what = EXPECTED.get((kind, loc[-1]) if kind else ("", loc[-1]))
            hint = f" ({what})" if what else ""
            out.setdefault(f"{where}.{loc[-1]}", f"{where}: missing key {loc[-1]!r}{hint}")
            continue
        parts, kind, key, value, _ = walk.resolve(loc)
        path = ".".join(parts) or "top level"
        if path in out:
            continue
        expected = EXPECTED.get((kind, key)) or EXPECTED.get((kind, None))
        if expected is None:
            out[path] = f"{path}: {err['msg']}"
        elif isinstance(value, list) and not value and "list" in expected:
            out[path] = f"{path}: expected {expected}, got an empty list"
        else:
            out[path] = f"{path}: expected {expected}, got {describe(value)}"
    return list(out.values())

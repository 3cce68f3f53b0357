"""minikafka: typed, durable pipelines with one SQLite file as the state ledger.

The pure-Python API (this module) needs only pydantic; Spark and great-expectations
are imported only by the engine and quality modules.
"""

from .api import engines as _engines
from .api.pipes import FullPipeline, Pipeline
from .api.record import Record
from .api.source import Source
from .api.streams import JsonObject, Stream, StreamingConsumer
from .api.topic import RecordNotFoundError, Topic
from .api.windows import CountWindow, FixedTimeWindow, RelaxedTimeWindow, Window, WindowEmitter
from .errors import (
    ConnectorError,
    ConsumerNotFoundError,
    DuplicateMessageError,
    FanOutError,
    FanOutFailure,
    InvalidNameError,
    InvalidRecordError,
    LedgerError,
    MigrationError,
    MinikafkaError,
    MissingDependencyError,
    PipelineCycleError,
    PipelineError,
    SchemaMismatchError,
    SourceClosedError,
    StreamingConfigError,
    TopicNotFoundError,
    UnknownStatusError,
    UnsupportedTypeError,
    WindowFailedError,
    WrongThreadError,
)
from .ledger.events import Event
from .ledger.runlog import RunResult

__version__ = "0.1.0"


def _load_spark_engine():
    # the root is the top layer: it may point down at the engine; the API may not
    from .spark import arms

    return arms


_engines.register_engine("spark", _load_spark_engine)

__all__ = [
    "ConnectorError",
    "ConsumerNotFoundError",
    "CountWindow",
    "FixedTimeWindow",
    "JsonObject",
    "RelaxedTimeWindow",
    "Stream",
    "StreamingConfigError",
    "StreamingConsumer",
    "Window",
    "WindowEmitter",
    "WindowFailedError",
    "DuplicateMessageError",
    "Event",
    "FanOutError",
    "FanOutFailure",
    "FullPipeline",
    "InvalidNameError",
    "InvalidRecordError",
    "LedgerError",
    "MigrationError",
    "MinikafkaError",
    "MissingDependencyError",
    "Pipeline",
    "PipelineCycleError",
    "PipelineError",
    "Record",
    "RecordNotFoundError",
    "RunResult",
    "SchemaMismatchError",
    "Source",
    "SourceClosedError",
    "Topic",
    "TopicNotFoundError",
    "UnknownStatusError",
    "UnsupportedTypeError",
    "WrongThreadError",
]

"""minikafka: typed, durable pipelines with one SQLite file as the state ledger.

The pure-Python API (this module) needs only pydantic; Spark and great-expectations
are imported only by the engine and quality modules.
"""

from .api import engines as _engines
from .api.groups import ConsumerGroup
from .api.pipes import FullPipeline, Pipeline
from .api.record import Record
from .api.source import Source
from .api.topic import RecordNotFoundError, Topic
from .errors import (
    ConsumerNotFoundError,
    DeliveryConfigError,
    DeliveryError,
    DuplicateMessageError,
    FanOutError,
    FanOutFailure,
    InvalidNameError,
    InvalidOffsetError,
    InvalidRecordError,
    LedgerError,
    MigrationError,
    MinikafkaError,
    MissingDependencyError,
    PartitionOutOfRangeError,
    PipelineCycleError,
    PipelineError,
    SchemaMismatchError,
    SourceClosedError,
    TopicNotFoundError,
    UnknownStatusError,
    UnsupportedTypeError,
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
    "ConsumerGroup",
    "ConsumerNotFoundError",
    "DeliveryConfigError",
    "DeliveryError",
    "DuplicateMessageError",
    "Event",
    "FanOutError",
    "FanOutFailure",
    "FullPipeline",
    "InvalidNameError",
    "InvalidOffsetError",
    "InvalidRecordError",
    "LedgerError",
    "MigrationError",
    "MinikafkaError",
    "MissingDependencyError",
    "PartitionOutOfRangeError",
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

"""minikafka: typed, durable pipelines with one SQLite file as the state ledger.

The pure-Python API (this module) needs only pydantic; Spark and great-expectations
are imported only by the engine and quality modules.
"""

from .errors import (
    ConsumerNotFoundError,
    DuplicateMessageError,
    FanOutError,
    FanOutFailure,
    InvalidNameError,
    InvalidRecordError,
    LedgerError,
    MigrationError,
    MinikafkaError,
    PipelineCycleError,
    PipelineError,
    SchemaMismatchError,
    SourceClosedError,
    TopicNotFoundError,
    UnknownStatusError,
    UnsupportedTypeError,
    WrongThreadError,
)
from .events import Event
from .pipeline import FullPipeline, Pipeline
from .record import Record
from .runlog import RunResult
from .source import Source
from .topic import RecordNotFoundError, Topic

__version__ = "0.1.0"

__all__ = [
    "ConsumerNotFoundError",
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

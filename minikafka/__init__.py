"""minikafka: typed, durable pipelines with one SQLite file as the state ledger.

The pure-Python API (this module) needs only pydantic; Spark and great-expectations
are imported only by the engine and quality modules.
"""

from .api import engines as _engines
from .api.groups import ConsumerGroup
from .api.notifications import Listener, Notification
from .api.pipes import FullPipeline, Pipeline
from .api.queues import Job, Queue
from .api.record import Record
from .api.source import Source
from .api.streams import JsonObject, Stream, StreamingConsumer
from .api.topic import RecordNotFoundError, Topic
from .api.transaction import Transaction
from .api.windows import CountWindow, FixedTimeWindow, RelaxedTimeWindow, Window, WindowEmitter
from .errors import (
    ConnectorError,
    ConsumerNotFoundError,
    DedupFieldError,
    DeliveryConfigError,
    DeliveryError,
    DuplicateMessageError,
    FanOutError,
    FanOutFailure,
    HandlerError,
    InvalidNameError,
    InvalidOffsetError,
    InvalidRecordError,
    JobNotOursError,
    LedgerError,
    LedgerNotFoundError,
    LedgerUpgradeRequiredError,
    MigrationError,
    MinikafkaError,
    MissingDependencyError,
    PartitionOutOfRangeError,
    PipelineCycleError,
    PipelineError,
    ProtectedTableError,
    QueueNotFoundError,
    ReadOnlyLedgerError,
    SchemaMismatchError,
    SourceClosedError,
    StreamingConfigError,
    TopicNotFoundError,
    TransactionError,
    UnknownStatusError,
    UnsupportedTypeError,
    WindowFailedError,
    WrongThreadError,
)
from .ledger.events import Event
from .ledger.runlog import RunResult

__version__ = "0.2.0"


def _load_spark_engine():
    # the root is the top layer: it may point down at the engine; the API may not
    from .spark import arms

    return arms


_engines.register_engine("spark", _load_spark_engine)

__all__ = [
    "ConnectorError",


    "ConsumerGroup",
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
    "DedupFieldError",
    "DeliveryConfigError",
    "DeliveryError",
    "DuplicateMessageError",
    "Event",
    "FanOutError",
    "FanOutFailure",
    "FullPipeline",
    "HandlerError",
    "InvalidNameError",
    "InvalidOffsetError",
    "InvalidRecordError",
    "Job",
    "JobNotOursError",
    "LedgerError",
    "LedgerNotFoundError",
    "LedgerUpgradeRequiredError",
    "Listener",
    "MigrationError",
    "MinikafkaError",
    "MissingDependencyError",
    "Notification",
    "PartitionOutOfRangeError",
    "Pipeline",
    "PipelineCycleError",
    "PipelineError",
    "ProtectedTableError",
    "Queue",
    "QueueNotFoundError",
    "ReadOnlyLedgerError",
    "Record",
    "RecordNotFoundError",
    "RunResult",
    "SchemaMismatchError",
    "Source",
    "SourceClosedError",
    "Topic",
    "TopicNotFoundError",
    "Transaction",
    "TransactionError",
    "UnknownStatusError",
    "UnsupportedTypeError",
    "WrongThreadError",
]

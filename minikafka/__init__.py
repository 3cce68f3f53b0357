"""minikafka: typed, durable pipelines with one SQLite file as the state ledger.

The pure-Python API (this module) needs only pydantic; Spark and great-expectations
are imported only by the engine and quality modules.
"""

from .api.core import engines as _engines
from .api.core.notifications import Listener, Notification
from .api.core.offsets import Extended, Offset, offset_of
from .api.core.record import Record
from .api.core.transaction import Transaction
from .api.modes.groups import ConsumerGroup
from .api.modes.pipes import FullPipeline, Pipeline
from .api.modes.queues import Job, JobInfo, Queue
from .api.modes.schedules import Scheduler
from .api.modes.windows import CountWindow, FixedTimeWindow, RelaxedTimeWindow, Window, WindowEmitter
from .api.source import Source
from .api.streams import JsonObject, Stream, StreamingConsumer
from .api.topic import RecordNotFoundError, Topic
from .errors import (
    ArgumentTypeError,
    BackfillError,
    BackfillOptionError,
    BackupError,
    ConcurrentRunError,
    ConnectorError,
    ConsoleNotFoundError,
    ConsoleRequestError,
    ConsumerNotFoundError,
    DedupFieldError,
    DeliveryConfigError,
    DeliveryError,
    DuplicateMessageError,
    EngineError,
    FanOutError,
    FanOutFailure,
    HandlerError,
    InputFileError,
    InvalidDurationError,
    InvalidFilterError,
    InvalidNameError,
    InvalidOffsetError,
    InvalidRecordError,
    InvalidSettingError,
    JobCancelledError,
    JobFailedError,
    JobNotFoundError,
    JobNotOursError,
    LedgerError,
    LedgerInUseError,
    LedgerNotFoundError,
    LedgerReplacedError,
    LedgerUpgradeRequiredError,
    LockBusy,
    MasterUnreachableError,
    MigrationError,
    MinikafkaError,
    MissingDependencyError,
    OutputFileError,
    OutputSchemaError,
    PartitionOutOfRangeError,
    PipelineCycleError,
    PipelineDefinitionError,
    PipelineError,
    ProtectedTableError,
    QualityCheckError,
    QualityError,
    QualityFailed,
    QueueNotFoundError,
    ReadOnlyLedgerError,
    RenderError,
    ScheduleConfigError,
    ScheduleNotFoundError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    SourceClosedError,
    SparkSetupError,
    StageFailed,
    StageRunningError,
    StagingError,
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
    from .spark.stages import arms

    return arms


_engines.register_engine("spark", _load_spark_engine)

__all__ = [
    "ConsoleNotFoundError",
    "ConsoleRequestError",
    "BackupError",
    "LedgerInUseError",
    "SnapshotNotFoundError",
    "StageFailed",
    "MasterUnreachableError",
    "SparkSetupError",
    "BackfillOptionError",
    "BackfillError",
    "OutputSchemaError",
    "ConcurrentRunError",
    "QualityCheckError",
    "QualityFailed",
    "QualityError",
    "OutputFileError",
    "InputFileError",
    "StageRunningError",
    "StagingError",
    "PipelineDefinitionError",
    "LockBusy",
    "InvalidFilterError",
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
    "EngineError",
    "FanOutError",
    "FanOutFailure",
    "FullPipeline",
    "HandlerError",
    "InvalidDurationError",
    "InvalidNameError",
    "InvalidOffsetError",
    "InvalidRecordError",
    "InvalidSettingError",
    "ArgumentTypeError",
    "Job",
    "JobCancelledError",
    "JobFailedError",
    "JobNotFoundError",
    "JobNotOursError",
    "JobInfo",
    "ScheduleConfigError",
    "ScheduleNotFoundError",
    "Scheduler",
    "LedgerError",
    "LedgerNotFoundError",
    "LedgerReplacedError",
    "LedgerUpgradeRequiredError",
    "Listener",
    "MigrationError",
    "MinikafkaError",
    "MissingDependencyError",
    "Notification",
    "Offset",
    "Extended",
    "offset_of",
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
    "RenderError",
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

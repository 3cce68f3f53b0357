"""The exception hierarchy: every error minikafka raises derives from MinikafkaError.

Payload validation errors are pydantic's own ``ValidationError`` (as in minikafka);
everything else is one of the classes below. Several also derive from the builtin
that minikafka raised for the same condition (``ValueError``, ``KeyError``), so code
written against minikafka keeps catching them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError


class MinikafkaError(Exception):
    """Base class for every minikafka error."""


class InvalidNameError(MinikafkaError, ValueError):
    """A topic, field or consumer name cannot be used as an SQL identifier."""


class SchemaMismatchError(MinikafkaError):
    """A topic exists with a different schema, model type mapping or dedup fields."""


class DedupFieldError(SchemaMismatchError, ValueError):
    """A dedup field is not on the model, or is named twice (a ValueError, as in minikafka)."""


class UnsupportedTypeError(MinikafkaError, TypeError):
    """A model field has a type the ledger cannot store exactly."""


class DuplicateMessageError(MinikafkaError):
    """A message violates its topic's dedup constraint.

    Attributes:
        topic: the topic name.
        key: the dedup field values of the offending message (or None if unknown).
        row: index of the offending row in a bulk call (or None).
    """

    def __init__(self, message: str, *, topic: str, key: dict | None = None, row: int | None = None):
        super().__init__(message)
        self.topic = topic
        self.key = key
        self.row = row


class InvalidRecordError(MinikafkaError, ValueError):
    """A validated payload still cannot be stored (NaN float, int beyond 64 bits, ...)."""


class UnknownFieldError(InvalidRecordError):
    """An incoming row has a field the topic's model lacks, and the topic's ``unknown_fields``
    is "quarantine" (the message names the field)."""


class TopicNotFoundError(MinikafkaError, KeyError):
    """A topic name is not known to the Source."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ConsumerNotFoundError(MinikafkaError, KeyError):
    """A consumer name is not registered on the topic."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownStatusError(MinikafkaError, ValueError):
    """A status other than 'new' or 'handled' was asked for."""


class SourceClosedError(MinikafkaError):
    """The Source was closed; open a new one."""


class WrongThreadError(MinikafkaError):
    """A Source was used from a thread other than the one that opened it."""


class LedgerError(MinikafkaError):
    """The SQLite file cannot be opened or used (missing directory, locked, too old)."""


class LedgerNotFoundError(LedgerError):
    """No ledger at the path: the file is missing (and may not be created), or holds no ledger.

    Attributes:
        path: the path that was asked for.
    """

    def __init__(self, message: str, *, path: str):
        super().__init__(message)
        self.path = path


class ReadOnlyLedgerError(LedgerError):
    """A write through a Source opened read-only (or a ledger only readable as it is).

    Attributes:
        path: the ledger file.
    """

    def __init__(self, message: str, *, path: str):
        super().__init__(message)
        self.path = path


class LedgerUpgradeRequiredError(LedgerError):
    """A read-only open of a ledger written in an older format: the upgrade needs a write.

    Attributes:
        path: the ledger file.
        found: the format stored in the file.
    """

    def __init__(self, message: str, *, path: str, found: int):
        super().__init__(message)
        self.path = path
        self.found = found


class MigrationError(MinikafkaError):
    """A topic migration failed; nothing was changed.

    A failure raised by the migration function or by validation reaches the caller as
    an instance of both its own type and MigrationError (see ``migration_failure``), so
    ``except ValidationError`` (minikafka's contract) and ``except MigrationError`` both work.
    """


_MIGRATION_TYPES: dict[type, type] = {}


def _migration_type(kind: type[BaseException]) -> type:
    if issubclass(kind, MigrationError):
        return kind
    if kind not in _MIGRATION_TYPES:
        _MIGRATION_TYPES[kind] = type(kind.__name__, (MigrationError, kind), {"__module__": kind.__module__})
    return _MIGRATION_TYPES[kind]


def migration_failure(exc: BaseException, message: str) -> BaseException:
    """``exc`` as an instance of both its type and MigrationError (or ``exc`` itself, noted).

    A pydantic ValidationError keeps its errors (``.errors()``) and gets ``message`` as a
    note; any other exception gets ``message`` as its text. When the two types cannot be
    combined, the original exception is returned with ``message`` as a note.
    """
    if isinstance(exc, MigrationError):
        return exc
    try:
        combined = _migration_type(type(exc))
        if isinstance(exc, ValidationError):
            new = combined.from_exception_data(exc.title, exc.errors(include_url=False))
            new.add_note(message)
        else:
            new = combined.__new__(combined)
            new.args = (message,)
            new.__dict__.update(getattr(exc, "__dict__", {}))
        return new
    except Exception:  # a final or unusual exception type: keep the original
        exc.add_note(message)
        return exc


class PipelineError(MinikafkaError):
    """A pipeline is misconfigured (no target, wrong topic, bad strategy)."""


class PipelineCycleError(PipelineError, ValueError):
    """The pipeline DAG contains a cycle (message names it)."""


@dataclass(frozen=True)
class FanOutFailure:
    """One sibling transform that failed for one source row during a best_effort run."""

    record_id: int
    source: str
    target: str | None
    exception: BaseException


class FanOutError(MinikafkaError):
    """Raised at the end of a best_effort run if any sibling raised.

    Successful sibling writes are kept; source rows with any failed sibling stay
    ``new`` so a corrected run retries them.

    Attributes:
        failures: list of FanOutFailure, in the order they happened.
    """

    def __init__(self, failures: list[FanOutFailure]):
        self.failures: list[FanOutFailure] = list(failures)
        lines = [f"{len(self.failures)} sibling failure(s) during best_effort run"]
        for f in self.failures:
            arrow = f"{f.source} -> {f.target}" if f.target is not None else f.source
            lines.append(f"  record={f.record_id} {arrow}: {type(f.exception).__name__}: {f.exception}")
        super().__init__("\n".join(lines))


class MissingDependencyError(MinikafkaError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class RenderError(MinikafkaError):
    """A picture could not be drawn (Graphviz's dot failed, or an unknown image format)."""


class PartitionOutOfRangeError(MinikafkaError, ValueError):
    """A partition number outside a topic's partitions (the message names topic and range)."""


class InvalidOffsetError(MinikafkaError, ValueError):
    """An offset that is not a non-negative integer, or lies beyond the partition's last row."""


class DeliveryConfigError(MinikafkaError, ValueError):
    """A deliveries file is invalid; the message names the file, the delivery and the key."""


class DeliveryError(MinikafkaError):
    """A delivery run could not deliver everything (the message names group, partition and endpoint)."""


class StagingError(MinikafkaError):
    """The staging location cannot be used, or what it holds is not what Spark wrote.

    The message names the location. Nothing of the run was committed.
    """


class StageRunningError(MinikafkaError):
    """Another run of the same stage holds its lock ("stage is running")."""


class StreamingConfigError(MinikafkaError, ValueError):
    """``streaming()`` was given arguments that do not describe one window kind (message says which)."""


class WindowFailedError(MinikafkaError):
    """A window's function kept failing; the window stays open and is offered again next run.

    Attributes:
        consumer: the streaming consumer.
        window_id: the window's id.
        attempts: how many times it was offered.
    """

    def __init__(self, message: str, *, consumer: str, window_id: int, attempts: int):
        super().__init__(message)
        self.consumer = consumer
        self.window_id = window_id
        self.attempts = attempts


class ConnectorError(MinikafkaError):
    """A source or sink cannot reach the outside (broker, endpoint, file); the message names it."""


class InputFileError(MinikafkaError):
    """An input file as a whole cannot be read (missing, unreadable, corrupt or truncated gzip,
    wrong columns); the message names the file. Bad lines are quarantined instead."""


class OutputFileError(MinikafkaError):
    """An output file cannot be written (missing directory, disk full); names the file.
    Nothing partial is left at its path."""


class TransactionError(MinikafkaError):
    """A transaction cannot be opened or joined (one already open, another Source's, closed)."""


class ProtectedTableError(TransactionError):
    """``tx.execute``/``tx.query`` SQL tried to change a table the ledger owns (one of its own
    tables, named with ``ledger.topics.identifiers.LEDGER_PREFIX``, or a topic's table); the message names it. Nothing ran; the transaction stays open."""


class QueueNotFoundError(MinikafkaError, KeyError):
    """No work queue with that name in the ledger."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class JobNotOursError(MinikafkaError):
    """A job was not claimed through this queue, or this handle already finished it."""


class JobNotFoundError(MinikafkaError, KeyError):
    """A queue's topic has no row with that job id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ScheduleNotFoundError(MinikafkaError, KeyError):
    """No schedule with that name in the ledger."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ScheduleConfigError(MinikafkaError, ValueError):
    """A schedule cannot be added as asked: a cron expression that is not five fields, or a
    queue whose topic has dedup fields (a schedule enqueues the same payload every time, so
    every fire after the first would be a duplicate); the message names the schedule."""


class JobCancelledError(MinikafkaError):
    """``q.result``: the job was cancelled, it has no result."""


class JobFailedError(MinikafkaError):
    """``q.result``: the job is in the dead letter (the message holds its last error)."""


class HandlerError(MinikafkaError):
    """A worker handler (MODULE:FUNCTION) cannot be imported or called."""


class InvalidSettingError(MinikafkaError, ValueError):
    """An option or an argument of a call has a value it cannot use (``busy_timeout="abc"``,
    ``q.cancel(0)``, ``claim_batch(n=-1)``); the message names it, the value and what is accepted."""


class ArgumentTypeError(MinikafkaError, TypeError):
    """An argument of the wrong kind (a clock that is not callable, a model that is not a pydantic
    class, a missing ``dedup=``); a TypeError too, as Python raises for such calls."""


class InvalidDurationError(InvalidSettingError):
    """A duration (an interval, a timeout, an age) that is not a finite number of seconds in
    range or text like ``500ms``, ``10s``, ``5m``, ``2h``, ``7d``; the message names the key
    and the value."""


class LedgerReplacedError(LedgerError):
    """The ledger file was replaced (renamed over) or removed while a Source had it open: the
    open connection still reads the old file, so waiting on it would never wake again. The
    message names the file; open a new Source on it."""


class BackupError(LedgerError):
    """A snapshot could not be taken, checked or read (names the file); nothing that looks like a
    complete snapshot is left behind."""


class SnapshotNotFoundError(BackupError):
    """No snapshot fits what was asked (none in the directory, none before the run)."""


class ForeignSnapshotError(BackupError):
    """The snapshot is of another ledger (another identity) than the one it would replace;
    nothing was changed (``restore ... --from-other-ledger`` does it anyway)."""


class LedgerInUseError(LedgerError):
    """The ledger is open in another process (a run, an appender, a worker, Litestream), so it
    cannot be replaced now; nothing was changed."""


class LockBusy(MinikafkaError):
    """The lock is held by another process; ``holder`` is what that process wrote in the file."""

    def __init__(self, path: Any, holder: str):
        super().__init__(f"{path} is held by {holder or 'another process'}")
        self.path = path
        self.holder = holder


class PipelineDefinitionError(MinikafkaError, ValueError):
    """A pipeline file is invalid; the message names the file, stage and key."""


class RecordNotFoundError(MinikafkaError, KeyError):
    """No row with that id in the topic."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidFilterError(MinikafkaError, ValueError):
    """A --where filter that names no column, uses an unknown operator or a value of the wrong type."""


class QualityError(MinikafkaError, ValueError):
    """A suite file is invalid (names the file and expectation), or a check failed under policy 'fail'."""


class QualityFailed(QualityError):
    """A suite failed under policy 'fail' (or a table-level check under 'quarantine')."""

    def __init__(self, outcomes: list[Any], failures: list[str]):
        """``outcomes``: the failing suites' outcomes; ``failures``: one text per failed expectation."""
        bad = failures
        super().__init__("data quality checks failed, nothing committed: " + "; ".join(bad))
        self.outcomes = outcomes


class QualityCheckError(QualityError):
    """An expectation could not run (a failed metric, a JVM exception): an error, not bad data.

    Attributes:
        stage, suite, expectation: where it happened; ``messages`` the exceptions raised.
    """

    def __init__(self, stage: str | None, suite: str, expectation: str, messages: list[str]):
        where = f"stage {stage!r}, " if stage else ""
        super().__init__(f"{where}suite {suite!r}: expectation {expectation} could not run: " + "; ".join(messages))
        self.stage, self.suite, self.expectation, self.messages = stage, suite, expectation, messages


class ConcurrentRunError(MinikafkaError):
    """Another run of the same consumer committed while this one was running."""


class OutputSchemaError(MinikafkaError):
    """A stage's output does not fit its target topic (names stage, topic, column)."""


class BackfillError(InputFileError):
    """A file-level problem (missing, unreadable, truncated gzip, wrong columns); names the file."""


class BackfillOptionError(MinikafkaError, ValueError):
    """A backfill option makes no sense (``batch_rows`` below 1, a delimiter of two characters...)."""


class SparkSetupError(MinikafkaError):
    """Java or the SQLite JDBC driver is missing; the message says what to install."""


class MasterUnreachableError(SparkSetupError):
    """No Spark master of a ``spark://`` URL accepts a connection; nothing was submitted."""


class EngineError(SparkSetupError):
    """A warm engine (Spark Connect server) cannot start, be reached or be stopped: its port is
    taken, nothing answers at its URL, or its JVM exited; the message says which."""


class EngineStoppedError(EngineError):
    """The engine a stage ran on stopped answering during the stage (its JVM was killed, it
    crashed, or its host went away): the stage failed for that cause, nothing was committed."""


class StageFailed(MinikafkaError):
    """A stage run failed; nothing of it was committed (``__cause__`` holds the error).

    Attributes:
        stage: the stage name.
        run_id: the run id (its row in the run log has status 'failed').
        result: the stage's ``RunResult`` (what it read, its error, its timings), when known.
    """

    def __init__(self, stage: str, run_id: str, exc: BaseException | str, result: Any = None):
        text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        super().__init__(f"stage {stage!r} failed (run {run_id}): {text}")
        self.stage = stage
        self.run_id = run_id
        self.result = result


class ConsoleNotFoundError(MinikafkaError, LookupError):
    """A console page names what the ledger does not hold (a run, a quarantined row): a 404 page."""


class ConsoleRequestError(MinikafkaError, ValueError):
    """A console page or action got a filter or argument it cannot use: a 400 page naming it."""


class LakeError(MinikafkaError):
    """A lake table (Iceberg) cannot be written or read as asked; names the target."""


class LakeConfigError(LakeError, ValueError):
    """A lake target is declared wrongly (unknown column, bad partitioning, a changed definition)."""

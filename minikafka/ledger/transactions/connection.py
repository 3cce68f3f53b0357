"""The SQLite file: connection settings, the ledger's own tables, and transactions.

Durability: WAL journal with ``synchronous=FULL``, so a transaction that returned
from COMMIT survives a power cut (NORMAL would keep the database consistent but
could lose the last commits). Every write transaction is ``BEGIN IMMEDIATE`` so
writers queue on ``busy_timeout`` instead of failing half-way with SQLITE_BUSY.

Opening writes nothing when the file's schema is current: the format is checked with
plain reads (no lock, so an open never waits behind a writer), and the DDL runs only
for a new file, an older format (upgrade.py) or a block added since. A read-only open
(``mode=ro``; ``immutable=1`` when the directory is read-only and SQLite cannot create
the ``-shm`` file) never writes at all: an older format is an error saying so, and a
block added since is an empty TEMP table.
"""

from __future__ import annotations

import logging
import math
import numbers
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from ...errors import (
    InvalidSettingError,
    LedgerError,
    LedgerNotFoundError,
    LedgerUpgradeRequiredError,
    ReadOnlyLedgerError,
    SourceClosedError,
    WrongThreadError,
)
from ...util.clock import utc_now
from ...util.dirs import make_missing_dirs, remove_made_dirs
from ..topics import keys
from ..topics.bulk import CACHE_KIB
from . import filecheck, identity, upgrade
from .events import Event, Observer, deliverer, notify
from .schema import LEDGER_FORMAT, MIN_SQLITE, missing_objects, schema_statements, temp_table_statement

log = logging.getLogger("minikafka.ledger")


def _check_sqlite() -> None:
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise LedgerError(
            f"SQLite {sqlite3.sqlite_version} is too old: minikafka needs 3.37+ for STRICT tables"
        )


MAX_BUSY_TIMEOUT_MS = 2**31 - 1  # SQLite keeps busy_timeout as a C int of milliseconds


def busy_timeout_ms(busy_timeout: object) -> int:
    """``busy_timeout`` (seconds, a non-negative finite number) as SQLite's milliseconds,
    capped at what SQLite holds (about 24.8 days).

    Raises:
        InvalidSettingError: not a number (a string, a bool, None), negative, NaN or infinite.
    """
    if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, numbers.Real):
        raise InvalidSettingError(
            f"busy_timeout must be a number of seconds (int or float, >= 0), got {busy_timeout!r}")
    seconds = float(busy_timeout)
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidSettingError(f"busy_timeout must be a finite number of seconds >= 0, got {busy_timeout!r}")
    return min(int(seconds * 1000), MAX_BUSY_TIMEOUT_MS)


def file_uri(path: str, **params: str) -> str:
    """``file:`` URI of ``path`` (absolute, quoted) with query parameters such as mode=ro."""
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return "file:" + quote(str(Path(path).expanduser().resolve())) + (f"?{query}" if query else "")


def connect(path: str, *, busy_timeout: float = 30.0) -> sqlite3.Connection:
    """Open ``path`` for writing with the ledger's settings (autocommit; explicit transactions).

    A missing file is created (its directory must exist); the file is switched to WAL
    only when it is not in WAL mode already.

    Raises:
        LedgerError: the file cannot be opened, it is on a network file system
            (``filecheck.refuse_network_filesystem``), or SQLite is too old for STRICT tables.
    """
    _check_sqlite()
    if path != ":memory:":
        parent = Path(path).expanduser().resolve().parent
        if not parent.is_dir():
            raise LedgerError(f"cannot open ledger {path!r}: directory {str(parent)!r} does not exist")
        filecheck.refuse_network_filesystem(path)
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot open ledger {path!r}: {exc}") from exc
    with _closed_on_failure(conn.close, path):
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms(busy_timeout)}")
        if path != ":memory:":
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode.lower() != "wal":
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise LedgerError(f"cannot switch {path!r} to WAL journal mode (got {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        # up to 64 MiB of pages (allocated only as used): a large commit inserting into a
        # unique index in key-random order then rereads few pages (measured: 1M rows 2x faster)
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        keys.register(conn)
    return conn


@contextmanager
def _closed_on_failure(close, path: str) -> Iterator[None]:
    """Run ``close`` when the block fails; an SQLite error leaves it as a LedgerError naming ``path``."""
    try:
        yield
    except sqlite3.Error as exc:
        close()
        raise LedgerError(f"cannot open ledger {path!r}: {_explain(exc)}") from exc
    except BaseException:
        close()
        raise


def connect_read_only(path: str, *, busy_timeout: float = 30.0) -> sqlite3.Connection:
    """Open an existing ``path`` read-only (``mode=ro``): no write, no write lock, no new file.

    When SQLite cannot create the WAL's ``-shm`` file (a read-only directory or mount)
    the file is opened ``immutable=1`` instead, unless a non-empty ``-wal`` file holds
    commits an immutable open would not see: then the error says so.

    Raises:
        LedgerNotFoundError: no file at ``path``.
        LedgerError: the file cannot be read.
    """
    _check_sqlite()
    if not Path(path).expanduser().exists():
        raise LedgerNotFoundError(f"no ledger at {path}", path=path)

    def attempt(**params: str) -> sqlite3.Connection:
        conn = sqlite3.connect(file_uri(path, **params), uri=True, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms(busy_timeout)}")
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
        except BaseException:
            conn.close()
            raise
        keys.register(conn)  # lookups by dedup key compute its hash
        return conn

    try:
        return attempt(mode="ro")
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_CANTOPEN and "unable to open" not in str(exc):
            raise LedgerError(f"cannot read ledger {path!r}: {_explain(exc)}") from exc
        wal = Path(f"{Path(path).expanduser()}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise LedgerError(
                f"cannot read ledger {path!r}: its directory is read-only, so SQLite cannot create "
                f"{wal.name[:-4]}-shm to read the commits still in {wal.name}; copy both files to a "
                "writable directory (or checkpoint the ledger where it is written) and read the copy"
            ) from exc
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot read ledger {path!r}: {_explain(exc)}") from exc
    try:  # nothing can change the file (no -shm, no -wal): read it as the snapshot it is
        return attempt(mode="ro", immutable="1")
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot read ledger {path!r}: {_explain(exc)}") from exc


def _is_read_only(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return (code is not None and code & 0xFF == sqlite3.SQLITE_READONLY) or "readonly" in str(exc)


def _explain(exc: sqlite3.Error) -> str:
    if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
        return "the file is not an SQLite database"
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_CANTOPEN or "unable to open" in str(exc):
        return (f"{exc} (writing needs a writable file and directory: SQLite creates its -wal and -shm "
                "files beside the ledger; to read a read-only copy, open it with read_only=True)")
    return str(exc)


def _make_parents(directory: Path, path: str) -> list[Path]:
    """Create ``directory`` and its missing parents; the ones created, outermost first.

    Raises:
        LedgerError: one cannot be created (a read-only or full disk, a file in the way).
    """
    try:
        return make_missing_dirs(directory)
    except OSError as exc:
        raise LedgerError(f"cannot create ledger {path!r}: cannot create its directory {str(directory)!r}: "
                          f"{exc.strerror or exc}") from None


class Ledger:
    """One SQLite connection, owned by the thread that opened it.

    Transactions nest: the outermost ``atomic()`` is ``BEGIN IMMEDIATE``/``COMMIT``,
    inner ones are savepoints. Events queued inside a transaction are delivered
    after the outermost commit and dropped on rollback.

    Args:
        create: a missing file becomes a new ledger, in a directory created when missing
            (removed again if the ledger cannot be made there); False makes a missing (or
            empty) file a ``LedgerNotFoundError`` and creates nothing.
        read_only: open with ``mode=ro`` (never writes, never takes the write lock);
            ``atomic()`` raises ``ReadOnlyLedgerError``. Implies create=False.
    """

    def __init__(self, path: str, *, on_event: Observer | None = None, busy_timeout: float = 30.0,
                 create: bool = True, read_only: bool = False):
        busy_timeout_ms(busy_timeout)  # a bad value fails before any file is touched
        self.path = str(path)
        self.on_event = on_event
        self.read_only = False  # set once the schema is prepared (a :memory: ledger needs its DDL)
        self._owner = threading.get_ident()
        self._depth = 0
        self._pending: list[Event] = []
        self._undo: list[Callable[[], None]] = []  # on_rollback callbacks of the open transaction
        self._conn: sqlite3.Connection | None = None
        self._busy_timeout = busy_timeout
        self._committer = None  # this process's GroupCommitter for the file, once used
        self.upgraded_from: int | None = None  # the older format this open upgraded, if any
        if self.path != ":memory:":
            file = Path(self.path).expanduser()
            if file.is_dir():
                raise LedgerError(f"{self.path!r} is a directory, not a ledger file")
            if not file.exists() and (read_only or not create):
                parent = file.resolve().parent
                why = "" if parent.is_dir() else f" (directory {parent} does not exist)"
                raise LedgerNotFoundError(f"no ledger at {self.path}{why}", path=self.path)
            if not create and not read_only and file.is_file() and file.stat().st_size == 0:
                # an empty file is no ledger yet: only a Source that may create one makes it one
                raise LedgerNotFoundError(f"no ledger at {self.path}: the file is empty", path=self.path)
        made: list[Path] = []
        if read_only and self.path != ":memory:":
            self._conn = connect_read_only(self.path, busy_timeout=busy_timeout)
        else:
            if create and self.path != ":memory:":
                made = _make_parents(Path(self.path).expanduser().resolve().parent, self.path)
            try:
                self._conn = connect(self.path, busy_timeout=busy_timeout)
            except BaseException:
                remove_made_dirs(made)
                raise
        with _closed_on_failure(self.close, self.path):
            if read_only and self.path != ":memory:":
                self._prepare_read_only()
            else:
                self._prepare()
            if read_only:
                self._conn.execute("PRAGMA query_only = ON")
        self.read_only = read_only

    def _prepare(self) -> None:
        """Create or upgrade the schema when something is missing; a current file gets no write."""
        conn = self._conn
        found = upgrade.stored_format(conn)
        self._check_not_newer(found)
        if found == LEDGER_FORMAT and not missing_objects(conn) and identity.read_identity(conn) is not None:
            return
        self._init_schema()

    def _prepare_read_only(self) -> None:
        conn = self._conn
        found = upgrade.stored_format(conn)
        if found is None:
            empty = Path(self.path).expanduser().stat().st_size == 0
            raise LedgerNotFoundError(
                f"no ledger at {self.path}: " + ("the file is empty" if empty else
                                                 "the file is an SQLite database without minikafka's tables"),
                path=self.path)
        self._check_not_newer(found)
        if found < LEDGER_FORMAT:
            raise LedgerUpgradeRequiredError(
                f"{self.path} is a ledger of format {found}, and this minikafka reads format {LEDGER_FORMAT}: "
                "it is upgraded on its first write, and a read-only open never writes. Upgrade it once "
                f"with 'minikafka upgrade --source {self.path}' (or any write through Source(path)).",
                path=self.path, found=found)
        for kind, _name, statement in missing_objects(conn):
            if kind == "table":  # a block added since the file was written: empty, as it would be
                conn.execute(temp_table_statement(statement))

    def _check_not_newer(self, found: int | None) -> None:
        if found is not None and found > LEDGER_FORMAT:
            raise LedgerError(
                f"{self.path!r} was written by a newer minikafka (ledger format {found}); upgrade"
            )

    def _init_schema(self) -> None:
        with self.atomic():
            conn = self.conn
            found = upgrade.stored_format(conn)
            self._check_not_newer(found)
            if found is not None and found < LEDGER_FORMAT:
                upgrade.before_schema(conn, found)
            for statement in schema_statements():
                conn.execute(statement)
            if found is not None and found < LEDGER_FORMAT:
                upgrade.after_schema(conn, found, utc_now())
                self.upgraded_from = found
            if found != LEDGER_FORMAT:
                conn.execute(
                    "INSERT INTO _minikafka_meta (key, value) VALUES ('format', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(LEDGER_FORMAT),),
                )
            identity.ensure_identity_in_current_transaction(conn)

    @property
    def on_event(self) -> Observer | None:
        return self._on_event

    @on_event.setter
    def on_event(self, observer: Observer | None) -> None:
        # the calling convention is decided once per observer, not per event
        self._on_event = observer
        self._deliver = deliverer(observer)

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection, after checking the Source is open and used from its thread."""
        if self._conn is None:
            raise SourceClosedError(f"Source {self.path!r} is closed")
        if threading.get_ident() != self._owner:
            raise WrongThreadError(
                f"Source {self.path!r} was opened in another thread; open one Source per thread"
            )
        return self._conn

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    @contextmanager
    def relaxed_sync(self) -> Iterator[None]:
        """Commits made inside skip the fsync (``synchronous=NORMAL`` in WAL mode).

        For writes that only move consumer positions (offset commits): they survive a
        process crash; a power cut may undo the last of them, which means rows are
        delivered again (at-least-once), never that data is lost. The next FULL commit
        makes them durable too. Inside an enclosing transaction nothing changes.
        """
        if self._depth or self.path == ":memory:":
            yield
            return
        conn = self.conn
        conn.execute("PRAGMA synchronous = NORMAL")
        try:
            yield
        finally:
            if self._conn is not None:
                self._conn.execute("PRAGMA synchronous = FULL")

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database now, as far as readers allow (PASSIVE),
        outside any transaction: a bulk load calls it while it waits for Spark."""
        if self._depth or self.path == ":memory:":
            return
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Many large commits in a row (a backfill): no fsync per commit (``relaxed_sync``) and
        no checkpoint after each; one checkpoint at the end copies the log into the database.

        Without this, every commit past 1,000 logged pages checkpoints, and a checkpoint
        fsyncs the database file: measured, a quarter of a 1M-row backfill's commit time.
        """
        if self._depth or self.path == ":memory:":
            yield
            return
        conn = self.conn
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        try:
            with self.relaxed_sync():
                yield
        finally:
            if self._conn is not None:
                self._conn.execute("PRAGMA wal_autocheckpoint = 1000")
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (or a savepoint when nested).

        Raises:
            LedgerError: the database stayed locked for longer than busy_timeout.
        """
        conn = self.conn
        if self._depth == 0:
            if self.read_only:
                raise ReadOnlyLedgerError(
                    f"cannot write to {self.path}: this Source was opened read-only "
                    "(open it without read_only=True to write)", path=self.path)
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if _is_read_only(exc):
                    raise self._read_only_error(exc) from exc
                raise LedgerError(f"cannot start a write transaction on {self.path!r}: {exc}") from exc
            self._depth = 1
            mark = len(self._pending)
            try:
                yield conn
            except BaseException as exc:
                self._depth = 0
                del self._pending[mark:]
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._run_undo(0)
                if isinstance(exc, sqlite3.OperationalError) and _is_read_only(exc):
                    raise self._read_only_error(exc) from exc
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._depth = 0
                del self._pending[mark:]
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._run_undo(0)
                raise LedgerError(f"commit failed on {self.path!r}: {exc}") from exc
            self._depth = 0
            self._undo = []
            events, self._pending = self._pending, []
            notify(self._on_event, events, deliver=self._deliver)
            return
        # one name per depth keeps the SQL text constant, so sqlite3's statement cache hits
        name = f"mk_sp_{self._depth}"
        mark = len(self._pending)
        undo_mark = len(self._undo)
        conn.execute(f"SAVEPOINT {name}")
        self._depth += 1
        try:
            yield conn
        except BaseException:
            self._depth -= 1
            del self._pending[mark:]
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            self._run_undo(undo_mark)
            raise
        self._depth -= 1
        conn.execute(f"RELEASE {name}")

    def on_rollback(self, undo: Callable[[], None]) -> None:
        """Call ``undo()`` if what was written so far in the open transaction is rolled back
        (the transaction, or the savepoint open now); forget it once the transaction commits.

        For in-memory state that mirrors a write (a Job marked finished by an ack inside the
        caller's transaction): the state follows the transaction's outcome. Outside a
        transaction nothing can roll back, and ``undo`` is dropped.
        """
        if self._depth:
            self._undo.append(undo)

    def _run_undo(self, mark: int) -> None:
        undo, self._undo[mark:] = self._undo[mark:], []
        for fn in reversed(undo):
            try:
                fn()
            except Exception:  # an undo must never hide the error that rolled back
                log.exception("an on_rollback callback failed")

    def _read_only_error(self, exc: sqlite3.Error) -> ReadOnlyLedgerError:
        return ReadOnlyLedgerError(
            f"cannot write to {self.path}: the file (or its directory, or the mount) is read-only ({exc})",
            path=self.path)

    def emit(self, event: Event) -> None:
        """Queue an event for after the current commit (or deliver now outside one)."""
        if self.on_event is None:
            return
        if self._depth:
            self._pending.append(event)
        else:
            notify(self._on_event, [event], deliver=self._deliver)

    @property
    def can_group_commit(self) -> bool:
        """Whether a single write may join the process's group commit: a writable file ledger
        outside any transaction of this connection."""
        return not self._depth and self.path != ":memory:" and not self.read_only

    def group_commit(self, work):
        """Run ``work(conn)`` in the process's next group commit on this file (``ledger.transactions.group_commit``);
        returns its result once durable."""
        from . import group_commit

        _ = self.conn  # open and used from its thread
        if self._committer is None:
            busy = self._busy_timeout
            self._committer = group_commit.committer_for(self.path, lambda path: connect(path, busy_timeout=busy))
        try:
            return self._committer.run(work)
        except sqlite3.OperationalError as exc:
            if _is_read_only(exc):
                raise self._read_only_error(exc) from exc
            raise LedgerError(f"cannot write to {self.path!r}: {exc}") from exc

    def close(self) -> None:
        if self._committer is not None:
            from . import group_commit

            committer, self._committer = self._committer, None
            group_commit.release(committer)
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    @property
    def closed(self) -> bool:
        return self._conn is None

"""The SQLite file: connection settings, the ledger's own tables, and transactions.

Durability: WAL journal with ``synchronous=FULL``, so a transaction that returned
from COMMIT survives a power cut (NORMAL would keep the database consistent but
could lose the last commits). Every write transaction is ``BEGIN IMMEDIATE`` so
writers queue on ``busy_timeout`` instead of failing half-way with SQLITE_BUSY.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import LedgerError, SourceClosedError, WrongThreadError
from ..util.clock import utc_now
from . import upgrade
from .events import Event, Observer, deliverer, notify
from .schema import LEDGER_FORMAT, MIN_SQLITE, schema_statements


def connect(path: str, *, busy_timeout: float = 30.0) -> sqlite3.Connection:
    """Open ``path`` with the ledger's settings (autocommit; explicit transactions).

    Raises:
        LedgerError: the file cannot be opened or SQLite is too old for STRICT tables.
    """
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise LedgerError(
            f"SQLite {sqlite3.sqlite_version} is too old: minikafka needs 3.37+ for STRICT tables"
        )
    if path != ":memory:":
        parent = Path(path).expanduser().resolve().parent
        if not parent.is_dir():
            raise LedgerError(f"cannot open ledger {path!r}: directory {str(parent)!r} does not exist")
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        if path != ":memory:":
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise LedgerError(f"cannot switch {path!r} to WAL journal mode (got {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot open ledger {path!r}: {exc}") from exc
    return conn


class Ledger:
    """One SQLite connection, owned by the thread that opened it.

    Transactions nest: the outermost ``atomic()`` is ``BEGIN IMMEDIATE``/``COMMIT``,
    inner ones are savepoints. Events queued inside a transaction are delivered
    after the outermost commit and dropped on rollback.
    """

    def __init__(self, path: str, *, on_event: Observer | None = None, busy_timeout: float = 30.0):
        self.path = str(path)
        self.on_event = on_event
        self._owner = threading.get_ident()
        self._conn: sqlite3.Connection | None = connect(self.path, busy_timeout=busy_timeout)
        self._depth = 0
        self._pending: list[Event] = []
        self._init_schema()

    def _init_schema(self) -> None:
        with self.atomic():
            conn = self.conn
            found = upgrade.stored_format(conn)
            if found is not None and found > LEDGER_FORMAT:
                raise LedgerError(
                    f"{self.path!r} was written by a newer minikafka (ledger format {found}); upgrade"
                )
            if found is not None and found < LEDGER_FORMAT:
                upgrade.before_schema(conn, found)
            for statement in schema_statements():
                conn.execute(statement)
            if found is not None and found < LEDGER_FORMAT:
                upgrade.after_schema(conn, found, utc_now())
            if found != LEDGER_FORMAT:
                conn.execute(
                    "INSERT INTO _minikafka_meta (key, value) VALUES ('format', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(LEDGER_FORMAT),),
                )

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

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (or a savepoint when nested).

        Raises:
            LedgerError: the database stayed locked for longer than busy_timeout.
        """
        conn = self.conn
        if self._depth == 0:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise LedgerError(f"cannot start a write transaction on {self.path!r}: {exc}") from exc
            self._depth = 1
            mark = len(self._pending)
            try:
                yield conn
            except BaseException:
                self._depth = 0
                del self._pending[mark:]
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._depth = 0
                del self._pending[mark:]
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise LedgerError(f"commit failed on {self.path!r}: {exc}") from exc
            self._depth = 0
            events, self._pending = self._pending, []
            notify(self._on_event, events, deliver=self._deliver)
            return
        # one name per depth keeps the SQL text constant, so sqlite3's statement cache hits
        name = f"mk_sp_{self._depth}"
        mark = len(self._pending)
        conn.execute(f"SAVEPOINT {name}")
        self._depth += 1
        try:
            yield conn
        except BaseException:
            self._depth -= 1
            del self._pending[mark:]
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        self._depth -= 1
        conn.execute(f"RELEASE {name}")

    def emit(self, event: Event) -> None:
        """Queue an event for after the current commit (or deliver now outside one)."""
        if self.on_event is None:
            return
        if self._depth:
            self._pending.append(event)
        else:
            notify(self._on_event, [event], deliver=self._deliver)

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    @property
    def closed(self) -> bool:
        return self._conn is None

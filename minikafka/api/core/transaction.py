"""The caller's transaction (the outbox): user SQL, appends, enqueues, commits and notifications in one commit.

``source.transaction()`` yields a ``Transaction``. Any write that takes ``tx=`` joins it
through ``joined(source, tx)``, so a new API (a group's ``commit(..., tx=tx)``) joins the
same way::

    with joined(self.source, tx) as conn:   # the open transaction, or a new one when tx is None
        ...
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from ...errors import ProtectedTableError, TransactionError
from ...ledger.topics import LEDGER_PREFIX, topic_names
from .notifications import notify_in_current_transaction

if TYPE_CHECKING:
    from .handles import SourceHandle

# the transaction is ours to end: user SQL may not end it or leave savepoints behind
_CONTROL = re.compile(r"^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b", re.IGNORECASE)

RESERVED_PREFIX = LEDGER_PREFIX

# authorizer action -> (verb for the message, index of the table argument: 1 = arg1, 2 = arg2)
_WRITES = {
    sqlite3.SQLITE_INSERT: ("insert into", 1),
    sqlite3.SQLITE_UPDATE: ("update", 1),
    sqlite3.SQLITE_DELETE: ("delete from", 1),
    sqlite3.SQLITE_DROP_TABLE: ("drop", 1),
    sqlite3.SQLITE_ALTER_TABLE: ("alter", 2),
    sqlite3.SQLITE_CREATE_INDEX: ("create an index on", 2),
    sqlite3.SQLITE_DROP_INDEX: ("drop an index of", 2),
    sqlite3.SQLITE_CREATE_TRIGGER: ("create a trigger on", 2),
    sqlite3.SQLITE_DROP_TRIGGER: ("drop a trigger of", 2),
    sqlite3.SQLITE_ANALYZE: ("analyze", 1),
}
# creating a table, view, index or trigger whose own name is reserved for the ledger
_CREATES = {
    sqlite3.SQLITE_CREATE_TABLE: 1, sqlite3.SQLITE_CREATE_VIEW: 1, sqlite3.SQLITE_CREATE_INDEX: 1,
    sqlite3.SQLITE_CREATE_TRIGGER: 1,
}
_DANGEROUS_PRAGMAS = {"writable_schema"}
# TEMP objects: SQLite resolves an unqualified name to ``temp`` first, so a TEMP table, view or
# trigger named like a topic or a ledger table would take the ledger's own statements
# (action -> index of the name that must not shadow: 1 = arg1, 2 = arg2)
_TEMP_CREATES = {
    sqlite3.SQLITE_CREATE_TEMP_TABLE: 1, sqlite3.SQLITE_CREATE_TEMP_VIEW: 1,
    sqlite3.SQLITE_CREATE_TEMP_TRIGGER: 1, sqlite3.SQLITE_CREATE_TEMP_INDEX: 1,
}
# what SQLite would execute, whatever the text looks like ("/* x */ COMMIT", a BOM, ...)
_CONTROL_ACTIONS = {sqlite3.SQLITE_TRANSACTION: "end or begin the transaction",
                    sqlite3.SQLITE_SAVEPOINT: "use savepoints"}


class _Guard:
    """A sqlite3 authorizer for the caller's SQL: reads anywhere, writes only to the caller's own tables.

    Protected: every table of the ledger's own (``LEDGER_PREFIX``: the catalog, acks, runs, quarantine, ...) and
    every topic's table (writes to a topic go through ``topic.append(..., tx=tx)``, which
    checks the model and dedup). Denying happens while SQLite prepares the statement, so a
    denied statement has changed nothing.
    """

    def __init__(self, topics: set[str], ledger_path: str | None = None):
        self.topics = {t.lower() for t in topics}
        self.ledger_path = ledger_path
        self.denied: tuple[str, str] | None = None
        self.shadow = False

    def is_ledger(self, filename: str | None) -> bool:
        """Whether ATTACH names the ledger's own file (any spelling: relative, a symlink, a file: URI)."""
        if not filename or not self.ledger_path or self.ledger_path == ":memory:":
            return False
        name = filename
        if name.startswith("file:"):
            name = unquote(name[len("file:"):].split("?", 1)[0])
            if name.startswith("//"):
                name = name[2:]
        try:
            return os.path.samefile(name, self.ledger_path)
        except OSError:
            return os.path.realpath(name) == os.path.realpath(self.ledger_path)

    def protected(self, table: str | None) -> bool:
        if not table:
            return False
        lowered = table.lower()
        return lowered.startswith(RESERVED_PREFIX) or lowered in self.topics

    def __call__(self, action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
        control = _CONTROL_ACTIONS.get(action)
        if control is not None:
            return self._deny(control, "CONTROL")
        which = _TEMP_CREATES.get(action)
        if which is None and (db or "").lower() == "temp":  # CREATE TABLE temp.x: a plain create, in temp
            which = _CREATES.get(action)
        if which is not None:
            name = arg1 if which == 1 else arg2
            if self.protected(name):
                return self._deny("create a TEMP object named", name, shadow=True)
            if action in (sqlite3.SQLITE_CREATE_TEMP_TRIGGER, sqlite3.SQLITE_CREATE_TRIGGER) and self.protected(arg2):
                return self._deny("create a TEMP trigger on", arg2)
        if action == sqlite3.SQLITE_ALTER_TABLE and (arg1 or "").lower() == "temp":
            # the new name of a RENAME is not shown to the authorizer: it could shadow a ledger table
            return self._deny("alter a TEMP table", arg2 or "", shadow=True)
        if action == sqlite3.SQLITE_ATTACH and self.is_ledger(arg1):
            return self._deny("attach", "ATTACH the ledger")
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _DANGEROUS_PRAGMAS:
            return self._deny("use", f"PRAGMA {arg1}")
        write = _WRITES.get(action)
        if write is not None:
            verb, which = write
            table = arg1 if which == 1 else arg2
            if action == sqlite3.SQLITE_ANALYZE and table is None:
                return sqlite3.SQLITE_OK
            if self.protected(table):
                return self._deny(verb, table)
        which = _CREATES.get(action)
        if which is not None and (arg1 or "").lower().startswith(RESERVED_PREFIX):
            return self._deny("create", arg1)
        return sqlite3.SQLITE_OK

    def _deny(self, verb: str, table: str, *, shadow: bool = False) -> int:
        if self.denied is None:
            self.denied = (verb, table)
            self.shadow = shadow
        return sqlite3.SQLITE_DENY


class Transaction:
    """One open write transaction on a Source (from ``source.transaction()``).

    A clean exit of the ``with`` block commits everything done through it, and every
    ``tx=tx`` write; an exception rolls all of it back, the caller's own tables included.
    """

    def __init__(self, source: SourceHandle):
        self.source = source
        self._open = True

    def __repr__(self) -> str:
        return f"Transaction({self.source.path!r}, {'open' if self._open else 'closed'})"

    @property
    def active(self) -> bool:
        return self._open

    def _conn(self) -> sqlite3.Connection:
        if not self._open:
            raise TransactionError("this transaction is closed: use it only inside its `with` block")
        return self.source.ledger.conn

    def execute(self, sql: str, params: Any = ()) -> int:
        """Run one SQL statement with parameters; returns the number of rows it changed.

        The statement may read any table but write only the caller's own: writes to a
        table of the ledger's own or a topic's table are refused before anything runs.

        Raises:
            TransactionError: the transaction is closed, or the SQL tries to end it.
            ProtectedTableError: (a TransactionError) the SQL writes a table the ledger owns;
                nothing ran and the transaction stays open (an uncaught one rolls it back).
            sqlite3.Error: the statement failed (the transaction stays open).
        """
        return self._run(sql, params, "tx.execute", lambda cur: cur.rowcount)

    def query(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        """Run one SQL statement and return its rows as dicts (column name -> value).

        Raises:
            The same as ``execute``.
        """
        def rows(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
            if cur.description is None:
                return []
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]

        return self._run(sql, params, "tx.query", rows)

    def _run(self, sql: str, params: Any, what: str, result: Any) -> Any:
        conn = self._conn()
        if _CONTROL.match(sql):
            raise TransactionError(f"transaction control statements are not allowed in {what}")
        guard = _Guard(set(topic_names(conn)), self.source.path)
        conn.set_authorizer(guard)
        try:
            # the whole statement runs (and its rows are fetched) under the guard
            return result(conn.execute(sql, params))
        except sqlite3.DatabaseError as exc:
            if guard.denied is None:
                raise
            verb, target = guard.denied
            if target == "CONTROL":
                raise TransactionError(
                    f"transaction control statements are not allowed in {what}: it may not {verb} "
                    "(the `with` block commits or rolls back; nothing ran, the transaction is still open)"
                ) from exc
            if guard.shadow:
                raise ProtectedTableError(
                    f"{what} may not {verb} {target!r}: a TEMP object named like a topic's or the ledger's table "
                    "would take the ledger's own statements (use another name; nothing ran, "
                    "the transaction is still open)"
                ) from exc
            if target == "ATTACH the ledger":
                raise ProtectedTableError(
                    f"{what} may not attach the ledger's own file: a second handle on it inside this transaction "
                    "would lock the Source out of its own file (read its tables directly; nothing ran, the "
                    "transaction is still open)") from exc
            if target.startswith("PRAGMA "):
                why = "it could corrupt the ledger's catalog"
            elif target.lower().startswith(RESERVED_PREFIX):
                why = f"names starting with {RESERVED_PREFIX!r} belong to the ledger, which keeps them consistent"
            else:
                why = "it is a topic's table: write to a topic with topic.append(..., tx=tx)"
            raise ProtectedTableError(
                f"{what} may not {verb} {target!r}: {why} (nothing ran; the transaction is still open)"
            ) from exc
        finally:
            conn.set_authorizer(None)

    def notify(self, channel: str, payload: Any = None) -> int:
        """Queue a notification for ``channel``; listeners see it only if this transaction commits.

        Args:
            channel: any non-empty string.
            payload: a JSON-serialisable value (None allowed).

        Returns:
            The notification's id.

        Raises:
            ValueError: empty channel; TypeError: payload not JSON-serialisable.
        """
        conn = self._conn()
        return notify_in_current_transaction(conn, channel, payload)


@contextmanager
def open_transaction(source: SourceHandle) -> Iterator[Transaction]:
    """Body of ``Source.transaction()``: refuses to nest instead of deadlocking."""
    ledger = source.ledger
    ledger.conn  # noqa: B018 - raises SourceClosedError / WrongThreadError first
    if ledger.in_transaction:
        raise TransactionError(
            f"a transaction is already open on Source {source.path!r}: pass tx= to the writes "
            "that should join it instead of opening another one"
        )
    tx = Transaction(source)
    try:
        with ledger.atomic():
            yield tx
    finally:
        tx._open = False


@contextmanager
def joined(source: SourceHandle, tx: Transaction | None, *, savepoint: bool = True) -> Iterator[sqlite3.Connection]:
    """The connection inside ``tx`` (a savepoint in it), or inside a new transaction when tx is None.

    ``savepoint=False`` skips the savepoint inside ``tx``: only for writes whose sole
    statement that can fail comes first (nothing to undo when it does).

    Raises:
        TransactionError: tx is closed or belongs to another Source.
    """
    if tx is not None:
        if not isinstance(tx, Transaction):
            raise TransactionError(f"tx must come from source.transaction(), got {type(tx).__name__}")
        if tx.source is not source:
            raise TransactionError(
                f"tx belongs to Source {tx.source.path!r}, not to {source.path!r}: a transaction covers one file"
            )
        if not tx._open:
            raise TransactionError("this transaction is closed: use it only inside its `with` block")
        if not savepoint:
            yield source.ledger.conn
            return
    with source.ledger.atomic() as conn:
        yield conn

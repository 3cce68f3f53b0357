"""The caller's transaction (the outbox): user SQL, appends, enqueues, commits and notifications in one commit.

``source.transaction()`` yields a ``Transaction``. Any write that takes ``tx=`` joins it
through ``joined(source, tx)``, so a new API (a group's ``commit(..., tx=tx)``) joins the
same way::

    with joined(self.source, tx) as conn:   # the open transaction, or a new one when tx is None
        ...
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import TransactionError
from .notifications import notify_in_current_transaction

if TYPE_CHECKING:
    from .source import Source

# the transaction is ours to end: user SQL may not end it or leave savepoints behind
_CONTROL = re.compile(r"^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b", re.IGNORECASE)


class Transaction:
    """One open write transaction on a Source (from ``source.transaction()``).

    A clean exit of the ``with`` block commits everything done through it, and every
    ``tx=tx`` write; an exception rolls all of it back, the caller's own tables included.
    """

    def __init__(self, source: Source):
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
        return self.source._ledger.conn

    def execute(self, sql: str, params: Any = ()) -> int:
        """Run one SQL statement with parameters; returns the number of rows it changed.

        Raises:
            TransactionError: the transaction is closed, or the SQL tries to end it.
            sqlite3.Error: the statement failed (the transaction stays open).
        """
        conn = self._conn()
        if _CONTROL.match(sql):
            raise TransactionError("transaction control statements are not allowed in tx.execute")
        return conn.execute(sql, params).rowcount

    def query(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        """Run one SQL statement and return its rows as dicts (column name -> value)."""
        conn = self._conn()
        if _CONTROL.match(sql):
            raise TransactionError("transaction control statements are not allowed in tx.query")
        cur = conn.execute(sql, params)
        if cur.description is None:
            return []
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

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
def open_transaction(source: Source) -> Iterator[Transaction]:
    """Body of ``Source.transaction()``: refuses to nest instead of deadlocking."""
    ledger = source._ledger
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
def joined(source: Source, tx: Transaction | None, *, savepoint: bool = True) -> Iterator[sqlite3.Connection]:
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
            yield source._ledger.conn
            return
    with source._ledger.atomic() as conn:
        yield conn

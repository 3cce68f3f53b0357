"""KeyedTable: a topic that keeps one current row per key and takes upserts (``ledger/topics/keyed.py``).

Get one from ``Source.table(name, Model, key=(...), merge={...})``. It is a ``Topic``: its
rows are the versions (every upsert that changes a key appends one), so consumers,
``iter_new``, acks, replay and pipes read its changelog as they read any topic's new rows.
What it adds: ``upsert``/``upsert_many`` (``append``/``extend`` merge too), ``get`` by key,
``iter_current``/``count_current``/``to_arrow()`` of the current rows, and ``compact``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel

from ..errors import InvalidSettingError, SchemaMismatchError
from ..ledger.topics import acks, keyed
from ..util.faults import checkpoint
from ..util.gcpause import gc_paused
from .core.keyed import KeyedRows
from .core.record import Record
from .core.transaction import Transaction, joined
from .topic import ModelT, Topic


class KeyedTable(Topic[ModelT]):
    """A keyed table: a topic whose rows are versions of one current row per key.

    ``key`` and ``merge`` are as the catalog stores them; ``rows`` is its ``KeyedRows``.
    """

    rows_class = KeyedRows

    def __init__(self, source: Any, layout: Any, fingerprint: str, spec: keyed.TableSpec):
        self.spec = spec
        self.source = source
        self._layout = layout
        self._fingerprint = fingerprint
        self.rows: KeyedRows[ModelT] = KeyedRows(source.ledger, layout, fingerprint, source._fingerprints, spec)

    def __repr__(self) -> str:
        return f"KeyedTable({self.name!r}, {self.model.__name__}, key={self.spec.key!r})"

    @property
    def table_key(self) -> tuple[str, ...]:
        """The fields that identify a row of the table."""
        return self.spec.key

    @property
    def merge(self) -> dict[str, str]:
        """{field: merge function} of the columns that combine (the others take the newest value)."""
        return dict(self.spec.merge)

    # -- writing ------------------------------------------------------------------------
    def upsert(self, row: ModelT | dict[str, Any], *, tx: Transaction | None = None) -> Record[ModelT]:
        """Insert or merge one row by its key (one transaction, or the caller's ``tx``).

        Returns:
            The key's current record after the merge (a new version when anything changed;
            the stored one when the upsert changed nothing).

        Raises:
            pydantic.ValidationError: the row does not fit the model.
            InvalidRecordError: a value the ledger cannot store (nothing is written).

        Emits:
            message_appended, after the commit, when a version was written.
        """
        model = self.rows.validate(row)
        with joined(self.source, tx):
            self.rows.merge_in_current_transaction([model])
            current = self.rows.current_row(self.rows.encode(model))
            checkpoint("keyed:before-commit")
        checkpoint("keyed:after-commit")
        return self.rows.record(current, None)

    def upsert_many(self, rows: Iterable[ModelT | dict[str, Any]], *,
                    tx: Transaction | None = None) -> keyed.MergeCounts:
        """Insert or merge many rows in one transaction, in order: all or nothing. Several rows
        of one key make one version (folded in order by the merge functions).

        Returns:
            ``MergeCounts``: ``rows``, ``inserted`` (new keys), ``updated`` (changed keys),
            ``unchanged``, ``versions`` and the ids written (``first_id``..``last_id``).

        Raises:
            pydantic.ValidationError: a row does not fit the model (its index is in the loc).
            InvalidRecordError: a value the ledger cannot store; nothing is written.

        Emits:
            message_appended per version written, after the commit.
        """
        with gc_paused():
            rows = rows if isinstance(rows, list) else list(rows)
            models = self.rows.validate_many(rows)
            with joined(self.source, tx):
                result = self.rows.merge_in_current_transaction(models)
                checkpoint("keyed:before-commit")
            checkpoint("keyed:after-commit")
            return result

    # -- reading the current rows ---------------------------------------------------------
    def get(self, *key: Any, **named: Any) -> ModelT | None:  # type: ignore[override]
        """The current row of a key (its values in key order, or by field name), or None.

        ``record(*key)`` gives the Record (id, times, lineage); ``by_id(id)`` any version.

        Raises:
            InvalidSettingError: not the table's key fields.
        """
        row = self.rows.current_by_key(self.rows.key_values(key, named))
        return None if row is None else self.rows.model_of_row(row)

    def record(self, *key: Any, **named: Any) -> Record[ModelT] | None:
        """The Record of a key's current version, or None."""
        row = self.rows.current_by_key(self.rows.key_values(key, named))
        return None if row is None else self.rows.record(row, None)

    def by_id(self, _id: int) -> Record[ModelT]:
        """The version with id ``_id`` (``Topic.get``), current or superseded.

        Raises:
            RecordNotFoundError: no such id (or compacted away).
        """
        return self.rows.get(_id)

    def iter_current(self, *, records: bool = False, as_dict: bool = False) -> Iterator[Any]:
        """The current row of every key, in id order (models, Records or dicts)."""
        for row in self.rows.scan_current():
            if as_dict:
                yield self.rows.decode(row)
            elif records:
                yield self.rows.record(row, None)
            else:
                yield self.rows.model_of_row(row)

    def count_current(self) -> int:
        """How many keys the table holds."""
        return self.rows.count_current()

    def to_arrow(self, status: str | None = None, *, consumer: str | None = None, current: bool | None = None):
        """The current rows as a pyarrow Table (metadata columns first); with ``status`` or
        ``consumer`` (or ``current=False``), the versions as ``Topic.to_arrow`` gives them."""
        if current is None:
            current = status is None and consumer is None
        if not current:
            return super().to_arrow(status, consumer=consumer)
        from ..ledger.topics import rows_to_arrow

        handled = acks.handled_positions(self._conn, self.name)
        at = self._layout.partition_index
        rows = ((r[0], r[1], acks.status_of(r[2], r[0], r[at], handled), *r[3:]) for r in self.rows.scan_current())
        return rows_to_arrow(self._layout, rows, self.rows.decode)

    # -- maintenance ----------------------------------------------------------------------
    def compact(self) -> int:
        """Delete superseded versions that every consumer of the table has acked (all of them
        when no consumer is registered); returns how many. A consumer's unread versions stay."""
        return self.rows.compact()

    def migrate(self, new_model: type[BaseModel], fn: Any) -> Topic:
        """Not supported yet for a keyed table.

        Raises:
            SchemaMismatchError: always; nothing changes.
        """
        raise SchemaMismatchError(f"table {self.name!r}: migrating a keyed table is not supported yet")

    def set_retention(self, max_age: Any) -> None:
        """A keyed table is kept by ``compact()``, not by age (its current rows must stay).

        Raises:
            InvalidSettingError: always; nothing changes.
        """
        raise InvalidSettingError(f"table {self.name!r}: a keyed table has no retention by age; "
                                  "compact() deletes its superseded versions")

"""KeyedRows: the rows of a keyed table (``ledger/topics/keyed.py``), where every write is a merge.

A keyed table is a topic, so the modes (pipes, consumers, groups...) work on its rows as on
any topic's; only writing differs: each insert path of ``TopicRows`` merges its rows by key
(a new version per changed key) instead of appending them as they are. Reads of the current
rows (by key, in id order) are here too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import TypeAdapter

from ...errors import InvalidSettingError
from ...ledger.consuming import compact_table_in_current_transaction
from ...ledger.topics import PAGE, TopicLayout, acks, keyed
from ...ledger.transactions import Event, Ledger
from ...util.clock import utc_now
from ...util.faults import checkpoint
from .rows import ModelT, TopicRows


class KeyedRows(TopicRows[ModelT]):
    """The rows of one keyed table: a ``TopicRows`` whose writes merge by key."""

    def __init__(self, ledger: Ledger, layout: TopicLayout, fingerprint: str, fingerprints: dict[str, str],
                 spec: keyed.TableSpec):
        super().__init__(ledger, layout, fingerprint, fingerprints)
        self.spec = spec
        self._key_at = [layout.field_names.index(k) for k in spec.key]

    def __repr__(self) -> str:
        return f"KeyedRows({self.name!r}, {self.model.__name__}, key={self.spec.key!r})"

    # -- writing: every path merges ------------------------------------------------------
    def merge_in_current_transaction(self, models: list[ModelT], *, lineage: Sequence[tuple] | None = None,
                                     run_id: str | None = None, now: str | None = None) -> keyed.MergeCounts:
        """Merge validated models into the table (one merge: rows in order), in the caller's
        transaction.

        Raises:
            InvalidRecordError: a value the ledger cannot store (names the row); nothing written.

        Emits:
            message_appended per version written (queued until the commit).
        """
        return self.merge_encoded_in_current_transaction([self.encode(m) for m in models], lineage=lineage,
                                                         run_id=run_id, now=now)

    def merge_encoded_in_current_transaction(self, encoded: list[tuple], *, lineage: Sequence[tuple] | None = None,
                                             run_id: str | None = None, now: str | None = None) -> keyed.MergeCounts:
        """As ``merge_in_current_transaction``, from rows encoded by ``self.encode``
        (``lineage``: (parent id, parent topic) per row)."""
        result = keyed.merge_values_in_current_transaction(self.conn, self.layout, encoded, now or utc_now(),
                                                           lineage=lineage, run_id=run_id, spec=self.spec)
        if self.ledger.on_event is not None and result.first_id is not None:
            for row_id, model in self.load(list(range(result.first_id, result.last_id + 1))).items():
                self.ledger.emit(Event("message_appended", self.name, row_id,
                                       {"payload": model.model_dump(mode="json")}))
        return result

    def insert_located_in_current_transaction(
        self, model: ModelT, *, parent_id: int | None = None, parent_topic: str | None = None,
        run_id: str | None = None, ignore_duplicates: bool = False, now: str | None = None,
        partition: int | None = None,
    ) -> tuple[int, int] | None:
        """Merge one model (a pipe's or ``append``'s write); (id of the key's current version, 0)."""
        lineage = None if parent_id is None else [(parent_id, parent_topic)]
        self.merge_in_current_transaction([model], lineage=lineage, run_id=run_id, now=now)
        row = self.current_row(self.encode(model))
        return None if row is None else (row[0], 0)

    def insert_grouped(self, model: ModelT, *, ignore_duplicates: bool = False,
                       partition: int | None = None) -> tuple[int, int] | None:
        """A merge commits on its own (a keyed table takes no part in the group commit)."""
        with self.ledger.atomic():
            return self.insert_located_in_current_transaction(model)

    def insert_encoded_in_current_transaction(
        self, models: list[ModelT], encoded: list[tuple], *, status: str = "new", ignore_duplicates: bool = False,
        now: str | None = None,
    ) -> int:
        """Merge rows (``extend``'s write); returns the number of versions written."""
        now = now or utc_now()
        before = self.table.high_watermark()
        result = self.merge_in_current_transaction(models, now=now)
        if status == "handled" and result.versions:
            acks.mark_appended_handled_in_current_transaction(self.conn, self.name, before, now)
        return result.versions

    # -- reading the current rows -------------------------------------------------------
    def key_values(self, key: tuple, named: dict[str, Any]) -> tuple:
        """The stored values of a key given by position (``spec.key`` order) or by field name.

        Raises:
            InvalidSettingError: not every key field given, or given twice, or an unknown one.
        """
        names = self.spec.key
        if key and named:
            raise InvalidSettingError(f"table {self.name!r}: give the key by position or by name, not both")
        if named:
            unknown = sorted(set(named) - set(names))
            if unknown or len(named) != len(names):
                raise InvalidSettingError(f"table {self.name!r}: the key is {names!r}, got {sorted(named)!r}")
            key = tuple(named[n] for n in names)
        if len(key) != len(names):
            raise InvalidSettingError(f"table {self.name!r}: the key is {names!r} ({len(names)} value(s)), "
                                      f"got {len(key)} value(s)")
        adapters = self.__dict__.setdefault("_key_adapters", {})
        out = []
        for name, value in zip(names, key):
            col = self.layout.column(name)
            if name not in adapters:
                adapters[name] = TypeAdapter(self.model.model_fields[name].annotation)
            value = adapters[name].validate_python(value)
            if value is not None and col.encode is not None:
                value = col.encode(value)
            out.append(value)
        return tuple(out)

    def current_row(self, encoded: tuple) -> tuple | None:
        """The ``select_sql`` row of the current version of the key of ``encoded`` (field values)."""
        return keyed.current_row(self.conn, self.layout, self.spec, [encoded[i] for i in self._key_at])

    def current_by_key(self, key: tuple) -> tuple | None:
        """The ``select_sql`` row of the current version of ``key`` (stored values), or None."""
        return keyed.current_row(self.conn, self.layout, self.spec, key)

    def scan_current(self) -> Iterator[tuple]:
        """The current versions in id order, read in pages."""
        after = 0
        while True:
            page = keyed.current_page(self.conn, self.layout, after, PAGE)
            if not page:
                return
            yield from page
            after = page[-1][0]

    def count_current(self) -> int:
        return keyed.count_current(self.conn, self.name)

    def compact(self) -> int:
        """Delete the superseded versions every consumer has acked; returns how many.

        Emits: nothing (no row of the changelog a consumer still needs is touched).
        """
        with self.ledger.atomic() as conn:
            deleted = compact_table_in_current_transaction(conn, self.layout)
            checkpoint("keyed:compacted")
        return deleted

"""A topic's dedup key as one 64-bit integer: the index that keeps it stays small at any history.

A topic with dedup fields stores, beside the fields, ``"_key"``: a 64-bit hash of the dedup
fields' stored values, with a UNIQUE index on it (``"<topic>__key"``). An entry of that
index is about 15 bytes whatever the key (a URL is 60-100), so the index of 20 million rows
fits a page cache and each new key costs one small leaf, wherever it lands.

The hash decides nothing alone; dedup stays exact:

- a row whose hash is free is stored with it;
- a row whose hash is taken by a row with the same dedup values is a duplicate;
- a row whose hash is taken by a row with *other* dedup values (a collision: about one in
  10^5 for a 20M-row topic) is stored with ``"_key"`` NULL. A partial UNIQUE index on the
  dedup fields of such rows (``"<topic>__dedup" ... WHERE "_key" IS NULL``) keeps them
  unique among themselves, and a later row with the same values finds them there.

So a row is a duplicate exactly when a stored row has its dedup values, as before. The
inserts compute the hash in SQL (:data:`FUNCTION`, registered on every connection of the
ledger) from the values as the table stores them (each cast to its column's type), so every
path (one row, ``executemany``, ``INSERT ... SELECT`` from a row file) computes the same
number. A write of several rows computes it in Python instead when each value's type is
exactly what its column stores, so the number is the same: a stage's commit of Arrow
batches a column at a time (:func:`arrow_hashes`: a third of the SQL function's cost per
row), ``extend``, pipes and row files a row at a time (:func:`row_hashes`). The hash (blake2b, 8 bytes, of a typed encoding of the values) depends on nothing
but the values: the same in every process, machine and version.

A write that skipped rows as duplicates tells collisions apart with its upsert clause
(:meth:`~minikafka.ledger.topics.layout.TopicLayout.insert_sql`): a row whose hash is taken by
other values "updates" that row to itself, which counts as a change but adds no id. When
that happens (:func:`collided`) the write's rows are settled one by one
(:func:`settle_in_current_transaction`).
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct

KEY = "_key"
FUNCTION = "minikafka_key"
_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes


def dedup_hash(*values: object) -> int:
    """The 64-bit signed hash of stored dedup values (None, int, float, str, bytes)."""
    if len(values) == 1 and type(values[0]) is str:  # the common key (one text field), called per row: inline
        raw = values[0].encode("utf-8", "surrogatepass")
        return _from_bytes(_blake2b(b"\x03" + len(raw).to_bytes(8, "big") + raw, digest_size=8).digest(), "big",
                           signed=True)
    h = hashlib.blake2b(digest_size=8)
    for v in values:
        if v is None:
            h.update(b"\x00")
        elif isinstance(v, int):
            h.update(b"\x01" + int(v).to_bytes(8, "big", signed=True))
        elif isinstance(v, float):
            h.update(b"\x02" + struct.pack(">d", v if v != 0 else 0.0))  # -0.0 and 0.0 compare equal
        elif isinstance(v, str):
            raw = v.encode("utf-8", "surrogatepass")
            h.update(b"\x03" + len(raw).to_bytes(8, "big") + raw)
        else:
            raw = bytes(v)
            h.update(b"\x04" + len(raw).to_bytes(8, "big") + raw)
    return int.from_bytes(h.digest(), "big", signed=True)


_TAGS = {"INTEGER": 1, "TEXT": 3, "BLOB": 4}  # dedup_hash's tag of each type arrow_hashes takes


def arrow_hashes(layout, batch) -> list[int] | None:
    """:func:`dedup_hash` of every row's dedup values in an Arrow record batch of storage
    values, computed a column at a time (the messages built by Arrow, one blake2b call per
    row): the numbers the SQL function gives for the values the table stores, at a third of
    its cost. None when a dedup column's Arrow type is not exactly what its SQLite column
    stores (integers in INTEGER, strings in TEXT, binary in BLOB): then the insert computes
    the hash in SQL, from the values cast as stored."""
    import pyarrow as pa

    pieces = []
    for name in layout.dedup:
        sql_type = layout.column(name).sql_type
        if name not in batch.schema.names or sql_type not in _TAGS:
            return None
        piece = _message_piece(pa, batch.column(name), sql_type)
        if piece is None:
            return None
        pieces.append(piece)
    import pyarrow.compute as pc

    messages = pieces[0] if len(pieces) == 1 else pc.binary_join_element_wise(*pieces, _EMPTY(pa))
    blake2b = hashlib.blake2b
    digests = b"".join([blake2b(m, digest_size=8).digest() for m in messages.to_pylist()])
    import numpy as np

    return np.frombuffer(digests, dtype=">i8").astype(np.int64)


def _message_piece(pa, column, sql_type: str):
    """What :func:`dedup_hash` feeds blake2b for each value of ``column`` (an Arrow array),
    as an Arrow binary array; None for an Arrow type this does not take."""
    import numpy as np
    import pyarrow.compute as pc

    typ = column.type
    n = len(column)
    if sql_type == "INTEGER" and pa.types.is_integer(typ) and not pa.types.is_uint64(typ):
        values = column.fill_null(0).to_numpy(zero_copy_only=False).astype(">i8")
        head = np.empty((n, 9), np.uint8)
        head[:, 0] = _TAGS[sql_type]
        head[:, 1:] = values.view(np.uint8).reshape(n, 8)
        piece = _fixed(pa, head)
    elif (sql_type == "TEXT" and (pa.types.is_string(typ) or pa.types.is_large_string(typ))) or (
            sql_type == "BLOB" and (pa.types.is_binary(typ) or pa.types.is_large_binary(typ))):
        raw = column.cast(pa.large_binary())
        lengths = pc.binary_length(raw).fill_null(0).to_numpy(zero_copy_only=False).astype(">i8")
        head = np.empty((n, 9), np.uint8)
        head[:, 0] = _TAGS[sql_type]
        head[:, 1:] = lengths.view(np.uint8).reshape(n, 8)
        piece = pc.binary_join_element_wise(_fixed(pa, head).cast(pa.large_binary()), raw, _EMPTY(pa))
    else:
        return None
    if column.null_count:  # None is one byte 0 (dedup_hash)
        piece = pc.if_else(pc.is_null(column), pa.scalar(b"\x00", pa.large_binary()),
                           piece.cast(pa.large_binary()))
    return piece.cast(pa.large_binary())


def _EMPTY(pa):  # noqa: N802 - the separator of joined pieces: none
    return pa.scalar(b"", pa.large_binary())


def _fixed(pa, rows):
    """A (n, w) uint8 numpy array as an Arrow binary array of n values of w bytes."""
    n, width = rows.shape
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(rows.tobytes())])


_PY_TYPES = {"INTEGER": int, "TEXT": str, "BLOB": bytes, "REAL": float}
_INT64 = range(-(2**63), 2**63)


def row_hashes(layout, rows) -> list[int | None] | None:
    """:func:`dedup_hash` of each row's dedup values (rows of storage values, fields in
    order): for a row file (``rowfiles``) written where the rows were checked, so the commit
    reads the hash instead of computing it, and for an insert of several rows
    (``table.TopicTable``), so SQLite does not call the hash per row. A row gets None where a value is not of
    the exact Python type its column stores (a NaN, a bool, text in an INTEGER column...):
    its hash is computed in SQL from the value as cast. None when a dedup column's type is
    not one of INTEGER, REAL, TEXT and BLOB."""
    idx = [layout.field_names.index(name) for name in layout.dedup]
    types = [_PY_TYPES.get(layout.column(name).sql_type) for name in layout.dedup]
    if None in types:
        return None
    if len(idx) == 1 and types[0] is str:  # the common key (one text field): no loop per value
        i = idx[0]
        return [dedup_hash(row[i]) if type(row[i]) is str else None for row in rows]
    checks = list(zip(idx, types))
    out: list[int | None] = []
    append = out.append
    for row in rows:
        values = []
        for i, typ in checks:
            v = row[i]
            if v is not None and (type(v) is not typ or (typ is float and v != v) or (typ is int and v not in _INT64)):
                append(None)
                break
            values.append(v)
        else:
            append(dedup_hash(*values))
    return out


def register(conn: sqlite3.Connection) -> None:
    """Make :data:`FUNCTION` available on ``conn`` (every ledger connection gets it)."""
    conn.create_function(FUNCTION, -1, dedup_hash, deterministic=True)


def collided(conn: sqlite3.Connection, changes_before: int, top_before: int, top_after: int) -> bool:
    """Whether a write since ``changes_before`` (``conn.total_changes``) met a collision:
    more changes than ids it added (ids of one write are consecutive)."""
    return conn.total_changes - changes_before > top_after - top_before


def settle_in_current_transaction(conn: sqlite3.Connection, layout, params: list[tuple], *,
                                  lineage: bool) -> int:
    """Store, one by one, the rows of ``params`` (insert parameters, fields first) that are
    not stored yet: with their hash when it is free, else with ``"_key"`` NULL. Rows whose
    dedup values are stored already are skipped. Returns how many it stored."""
    idx = [layout.field_names.index(n) for n in layout.dedup]
    hashed = layout.insert_sql(lineage=lineage, ignore_duplicates=True)
    unhashed = layout.insert_sql(lineage=lineage, ignore_duplicates=True, unhashed=True)
    stored = 0
    for row in params:
        key = tuple(row[i] for i in idx)
        if layout.stored_key(conn, key) is not None:
            continue
        before = conn.total_changes
        top = conn.execute(f'SELECT coalesce(max("_id"), 0) FROM {layout.table}').fetchone()[0]
        conn.execute(hashed, row)
        added = conn.execute(f'SELECT coalesce(max("_id"), 0) FROM {layout.table}').fetchone()[0] - top
        if not added and conn.total_changes > before:  # its hash belongs to other values
            conn.execute(unhashed, row)
            added = 1
        stored += added
    return stored


def fill_in_current_transaction(conn: sqlite3.Connection, layout) -> int:
    """Compute ``"_key"`` for every row of ``layout``'s table (its rows were stored without
    it: an older ledger, a migration), before its key indexes exist. Where two rows' hashes
    collide, the row with the lower id keeps it and the others keep NULL. Returns the
    number of rows left NULL. Cost: one pass over the rows and one sort of their hashes.

    Raises:
        sqlite3.IntegrityError: two rows hold the same dedup values (as a unique index would).
    """
    from .identifiers import quote_identifier

    table = layout.table
    fields = [quote_identifier(n) for n in layout.field_names]
    dedup = ", ".join(quote_identifier(n) for n in layout.dedup)
    conn.execute(f'UPDATE {table} SET "{KEY}" = {layout.key_sql(fields)}')
    shared = [r[0] for r in conn.execute(
        f'SELECT "{KEY}" FROM {table} GROUP BY "{KEY}" HAVING count(*) > 1')]
    left = 0
    for h in shared:
        rows = conn.execute(f'SELECT "_id", {dedup} FROM {table} WHERE "{KEY}" = ? ORDER BY "_id"', (h,)).fetchall()
        seen = set()
        for row_id, *values in rows:
            if tuple(values) in seen:
                raise sqlite3.IntegrityError(f"UNIQUE constraint failed: {layout.name} ({dedup})")
            seen.add(tuple(values))
            if len(seen) > 1:
                conn.execute(f'UPDATE {table} SET "{KEY}" = NULL WHERE "_id" = ?', (row_id,))
                left += 1
    return left


def add_key_in_current_transaction(conn: sqlite3.Connection, layout) -> None:
    """Give an older topic table (a unique index on its dedup fields) the dedup hash: the
    ``"_key"`` column, filled, its unique index, and the dedup fields' index narrowed to
    the rows whose hash collided."""
    from .identifiers import quote_identifier

    conn.execute(f'ALTER TABLE {layout.table} ADD COLUMN "{KEY}" INTEGER')
    conn.execute(f"DROP INDEX IF EXISTS {quote_identifier(layout.name + '__dedup')}")
    fill_in_current_transaction(conn, layout)
    for statement in layout.dedup_index_ddl(layout.name):
        conn.execute(statement)

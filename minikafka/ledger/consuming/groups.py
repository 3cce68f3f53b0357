"""Consumer-group reads: the rows pending for a group in one partition, above an offset.

The group's committed offsets and acks are ``ledger.topics.acks``'; this module only reads the
topic table with them. ``api.modes.groups`` builds Records from the rows.
"""

from __future__ import annotations

import sqlite3

from ..topics import acks
from ..topics.identifiers import quote_identifier
from ..topics.layout import TopicLayout

FETCH_META = '"_id", "_created_at", "_parent_id", "_parent_topic", "_run_id"'
N_FETCH_META = 5


def _acked_above(conn: sqlite3.Connection, consumer_id: int, partition: int, start: int) -> bool:
    return conn.execute("SELECT 1 FROM _minikafka_acks WHERE consumer_id = ? AND row_id > ? AND partition = ? "
                        "LIMIT 1", (consumer_id, start, partition)).fetchone() is not None


def pending_rows(conn: sqlite3.Connection, layout: TopicLayout, consumer_id: int, partition: int, start: int,
                 limit: int, cache: dict) -> list[tuple]:
    """Rows (``FETCH_META`` then the fields) of ``partition`` above ``start``, not handled for every consumer, not acked by the group.

    ``cache`` keeps the statements built for a layout (the caller owns it).
    """
    acked = _acked_above(conn, consumer_id, partition, start)
    sql = cache.get((layout.name, not acked))
    if sql is None:
        unacked = "" if not acked else (
            ' AND NOT EXISTS (SELECT 1 FROM _minikafka_acks a WHERE a.consumer_id = ? AND a.row_id = "_id")')
        sql = cache[(layout.name, not acked)] = (
            f'SELECT {FETCH_META}, {", ".join(quote_identifier(n) for n in layout.field_names)} '
            f'FROM {layout.table} WHERE "_partition" = ? AND "_id" > ? AND {acks.unhandled_sql(layout.name)}{unacked} '
            'ORDER BY "_id" LIMIT ?')
    params = (partition, start, limit) if not acked else (partition, start, consumer_id, limit)
    return conn.execute(sql, params).fetchall()


def last_offset(conn: sqlite3.Connection, layout: TopicLayout, partition: int) -> int:
    """The largest id in ``partition`` (0 when it is empty)."""
    return conn.execute(
        f'SELECT max("_id") FROM {layout.table} WHERE "_partition" = ?', (partition,)).fetchone()[0] or 0

"""Topic-row retention: per-topic max ages, and deleting rows every consumer handled once older.

(Pruning the run log is ``ledger.consuming.runlog_retention``.) The policy and the clock are
``api.modes.retention``'s; this module moves rows.
"""

from __future__ import annotations

import sqlite3

from ..topics import acks, counts
from ..topics.identifiers import quote_identifier
from ..topics.layout import TopicLayout


def set_retention_in_current_transaction(conn: sqlite3.Connection, topic: str, max_age_s: float | None,
                                         now: str) -> None:
    if max_age_s is None:
        conn.execute("DELETE FROM _minikafka_retention WHERE topic = ?", (topic,))
        return
    conn.execute(
        "INSERT INTO _minikafka_retention (topic, max_age_s, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (topic) DO UPDATE SET max_age_s = excluded.max_age_s, updated_at = excluded.updated_at",
        (topic, float(max_age_s), now),
    )


def retention_settings(conn: sqlite3.Connection) -> dict[str, float]:
    return dict(conn.execute("SELECT topic, max_age_s FROM _minikafka_retention ORDER BY topic").fetchall())


def delete_expired_in_current_transaction(conn: sqlite3.Connection, layout: TopicLayout, older_than: str) -> int:
    """Delete rows every consumer has handled and created before ``older_than``.

    Never a row still pending for anyone, and never the newest row (SQLite would hand
    its id out again; offsets are never reused). The append-only trigger is lifted for
    this one statement, inside the transaction. The topic's row marks from the first
    deleted row up are counted again (counts.py).
    """
    done, params = acks.done_filter(None, layout.name)
    table = quote_identifier(layout.name)
    expired = f"{done} AND \"_created_at\" < ? AND \"_id\" < (SELECT max(\"_id\") FROM {table})"
    first = conn.execute(f"SELECT min(\"_id\") FROM {table} WHERE {expired}", (*params, older_than)).fetchone()[0]
    if first is None:
        return 0
    conn.execute(f"DROP TRIGGER IF EXISTS {quote_identifier(layout.name + '__append_only')}")
    deleted = conn.execute(f"DELETE FROM {table} WHERE \"_id\" >= ? AND {expired}", (first, *params, older_than)).rowcount
    conn.execute(layout.append_only_ddl(layout.name))
    counts.forget_from_in_current_transaction(conn, layout.name, first)
    counts.note_appended_in_current_transaction(conn, layout.name, partitions=layout.partitions)
    return deleted

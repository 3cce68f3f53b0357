"""What each consumer has left to do: lag and last activity, read from the ledger alone."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass

from ..topics import counts


@dataclass
class ConsumerInfo:
    """One registered consumer of one topic.

    ``lag``: rows still pending for it. ``last_activity``: the latest of its acks
    and its runs (None when it never did anything).
    """

    topic: str
    name: str
    created_at: str
    lag: int
    last_activity: str | None
    last_run_id: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def consumer_info(conn: sqlite3.Connection, topic: str | None = None, *, with_lag: bool = True) -> list[ConsumerInfo]:
    """Every consumer (of ``topic``, or of every topic), ordered by topic then registration.

    ``with_lag`` False: ``lag`` is left 0 (for a caller that counts it per partition itself).
    """
    where, params = ("WHERE topic = ?", (topic,)) if topic else ("", ())
    rows = conn.execute(
        f"SELECT id, topic, name, created_at FROM _minikafka_consumers {where} ORDER BY topic, id", params
    ).fetchall()
    out = []
    for cid, t, name, created in rows:
        lag = sum(counts.pending_counts(conn, t, cid).values()) if with_lag else 0
        times = [conn.execute("SELECT max(acked_at) FROM _minikafka_acks WHERE consumer_id = ?", (cid,)).fetchone()[0],
                 # offsets moved after registration (in-order acks and commits move the offset, no ack row)
                 conn.execute("SELECT max(updated_at) FROM _minikafka_offsets WHERE consumer_id = ? AND updated_at > ?",
                              (cid, created)).fetchone()[0],
                 conn.execute("SELECT max(updated_at) FROM _minikafka_attempts WHERE consumer_id = ?",
                              (cid,)).fetchone()[0]]
        run = conn.execute(
            "SELECT run_id, coalesce(finished_at, started_at) FROM _minikafka_runs r WHERE consumer = ? AND "
            "EXISTS (SELECT 1 FROM json_each(r.inputs) WHERE value = ?) ORDER BY started_at DESC LIMIT 1",
            (name, t),
        ).fetchone()
        if run:
            times.append(run[1])
        seen = [x for x in times if x]
        out.append(ConsumerInfo(t, name, created, lag, max(seen) if seen else None, run[0] if run else None))
    return out


def registered(conn: sqlite3.Connection, topics: list[str] | None = None) -> list[tuple[str, str]]:
    """(topic, consumer) of every registered consumer (of ``topics``), by topic then registration."""
    rows = conn.execute("SELECT topic, name FROM _minikafka_consumers ORDER BY topic, id").fetchall()
    wanted = None if topics is None else set(topics)
    return [(t, n) for t, n in rows if wanted is None or t in wanted]

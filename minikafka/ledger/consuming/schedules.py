"""The schedule tables: periodic jobs of queues, the due times fired, and leader leases.

``_minikafka_schedules`` holds one row per schedule (its queue, cron expression or period,
payload, catch-up bound, paused flag, next due time); ``_minikafka_schedule_fires`` one row
per (schedule, due time) fired: its primary key is what makes a due time fire once, whatever
the number of processes ticking (``row_id`` NULL: that fire was skipped).
``_minikafka_schedule_errors`` keeps a schedule's last failure to fire and how many fires it
skipped. ``_minikafka_leases`` holds expiring leader leases. Times are integer milliseconds
since the Unix epoch. The behaviour is ``api.modes.schedules``.
"""

from __future__ import annotations

import sqlite3

COLUMNS = ("name", "topic", "consumer", "cron", "every_ms", "payload", "priority", "max_catch_up", "paused",
           "next_due", "last_fired", "created_at")


def save_in_current_transaction(conn: sqlite3.Connection, row: dict) -> None:
    """Create the schedule, or replace its definition (keeps nothing of the old one but the name
    and its fired due times)."""
    conn.execute("DELETE FROM _minikafka_schedule_errors WHERE schedule = ?", (row["name"],))
    conn.execute(
        f"INSERT OR REPLACE INTO _minikafka_schedules ({', '.join(COLUMNS)}) "
        f"VALUES ({', '.join('?' for _ in COLUMNS)})", tuple(row[c] for c in COLUMNS))


def get(conn: sqlite3.Connection, name: str) -> dict | None:
    row = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM _minikafka_schedules WHERE name = ?", (name,)).fetchone()
    return None if row is None else dict(zip(COLUMNS, row))


def all_schedules(conn: sqlite3.Connection) -> list[dict]:
    return [dict(zip(COLUMNS, r)) for r in conn.execute(
        f"SELECT {', '.join(COLUMNS)} FROM _minikafka_schedules ORDER BY name")]


# a schedule's queue is still there (a dropped queue is never brought back by a tick)
_QUEUE_EXISTS = ("EXISTS (SELECT 1 FROM _minikafka_queues q WHERE q.topic = _minikafka_schedules.topic "
                 "AND q.consumer = _minikafka_schedules.consumer)")


def due(conn: sqlite3.Connection, now: int) -> list[dict]:
    """Schedules not paused, whose queue exists, whose next due time has come."""
    return [dict(zip(COLUMNS, r)) for r in conn.execute(
        f"SELECT {', '.join(COLUMNS)} FROM _minikafka_schedules WHERE paused = 0 AND next_due <= ? "
        f"AND {_QUEUE_EXISTS} ORDER BY name", (now,))]


def next_due(conn: sqlite3.Connection) -> int | None:
    """The earliest next due time of a schedule not paused whose queue exists."""
    return conn.execute(
        f"SELECT min(next_due) FROM _minikafka_schedules WHERE paused = 0 AND {_QUEUE_EXISTS}").fetchone()[0]


def queue_exists(conn: sqlite3.Connection, topic: str, consumer: str) -> bool:
    return conn.execute("SELECT EXISTS (SELECT 1 FROM _minikafka_queues WHERE topic = ? AND consumer = ?)",
                        (topic, consumer)).fetchone()[0] == 1


def errors(conn: sqlite3.Connection) -> dict[str, tuple[int, str, int, int]]:
    """schedule -> (due, error, at, skipped) of the schedules that failed to fire."""
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in conn.execute(
        "SELECT schedule, due, error, at, skipped FROM _minikafka_schedule_errors")}


def skip_fire_in_current_transaction(conn: sqlite3.Connection, name: str, due_ms: int, now: int, error: str) -> None:
    """Record that ``name`` skipped ``due_ms`` (a fire row without a job) and why."""
    conn.execute("INSERT OR IGNORE INTO _minikafka_schedule_fires (schedule, due, fired_at) VALUES (?, ?, ?)",
                 (name, due_ms, now))
    conn.execute(
        "INSERT INTO _minikafka_schedule_errors (schedule, due, error, at, skipped) VALUES (?, ?, ?, ?, 1) "
        "ON CONFLICT (schedule) DO UPDATE SET due = excluded.due, error = excluded.error, at = excluded.at, "
        "skipped = skipped + 1", (name, due_ms, error, now))


def set_paused_in_current_transaction(conn: sqlite3.Connection, name: str, paused: bool,
                                      next_due_ms: int | None = None) -> bool:
    return conn.execute(
        "UPDATE _minikafka_schedules SET paused = ?, next_due = coalesce(?, next_due) WHERE name = ?",
        (int(paused), next_due_ms, name)).rowcount == 1


def remove_in_current_transaction(conn: sqlite3.Connection, name: str) -> bool:
    conn.execute("DELETE FROM _minikafka_schedule_fires WHERE schedule = ?", (name,))
    conn.execute("DELETE FROM _minikafka_schedule_errors WHERE schedule = ?", (name,))
    return conn.execute("DELETE FROM _minikafka_schedules WHERE name = ?", (name,)).rowcount == 1


def claim_fire_in_current_transaction(conn: sqlite3.Connection, name: str, due_ms: int, now: int) -> bool:
    """Record that ``name`` fires for ``due_ms``; False when that due time already fired."""
    return conn.execute(
        "INSERT OR IGNORE INTO _minikafka_schedule_fires (schedule, due, fired_at) VALUES (?, ?, ?)",
        (name, due_ms, now)).rowcount == 1


def set_fire_row_in_current_transaction(conn: sqlite3.Connection, name: str, due_ms: int, row_id: int) -> None:
    conn.execute("UPDATE _minikafka_schedule_fires SET row_id = ? WHERE schedule = ? AND due = ?",
                 (row_id, name, due_ms))


def advance_in_current_transaction(conn: sqlite3.Connection, name: str, next_due_ms: int,
                                   last_fired: int | None) -> None:
    conn.execute("UPDATE _minikafka_schedules SET next_due = ?, last_fired = coalesce(?, last_fired) WHERE name = ?",
                 (next_due_ms, last_fired, name))


def fires(conn: sqlite3.Connection, name: str, limit: int = 100) -> list[tuple[int, int | None, int]]:
    """(due, row_id, fired_at) of the latest fires of a schedule, newest first."""
    return conn.execute(
        "SELECT due, row_id, fired_at FROM _minikafka_schedule_fires WHERE schedule = ? ORDER BY due DESC LIMIT ?",
        (name, limit)).fetchall()


def prune_fires_in_current_transaction(conn: sqlite3.Connection, before: int) -> int:
    return conn.execute("DELETE FROM _minikafka_schedule_fires WHERE due < ?", (before,)).rowcount


# -- leader leases ---------------------------------------------------------------------
def take_lease_in_current_transaction(conn: sqlite3.Connection, name: str, holder: str, now: int,
                                      until: int) -> bool:
    """Take or renew the lease ``name`` for ``holder`` when it is free, expired or already ours."""
    conn.execute(
        "INSERT INTO _minikafka_leases (name, holder, expires_at) VALUES (?1, ?2, ?3) "
        "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at "
        "WHERE _minikafka_leases.holder = excluded.holder OR _minikafka_leases.expires_at <= ?4",
        (name, holder, until, now))
    row = conn.execute("SELECT holder FROM _minikafka_leases WHERE name = ?", (name,)).fetchone()
    return row is not None and row[0] == holder


def release_lease_in_current_transaction(conn: sqlite3.Connection, name: str, holder: str) -> None:
    conn.execute("DELETE FROM _minikafka_leases WHERE name = ? AND holder = ?", (name, holder))


def lease_holder(conn: sqlite3.Connection, name: str, now: int) -> str | None:
    row = lease(conn, name, now)
    return None if row is None else row[0]


def lease(conn: sqlite3.Connection, name: str, now: int) -> tuple[str, int] | None:
    """(holder, expires_at) of the lease ``name`` while it runs, else None."""
    return conn.execute("SELECT holder, expires_at FROM _minikafka_leases WHERE name = ? AND expires_at > ?",
                        (name, now)).fetchone()

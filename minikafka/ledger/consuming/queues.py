"""The work-queue tables: a queue's settings and sync mark, and the state row of each live job.

``_minikafka_queues`` holds one row per queue (its consumer id, settings and ``synced_upto``
mark); ``_minikafka_queue_jobs`` one row per job that is pending, processing or dead. Times
are integer milliseconds since the Unix epoch. The queue's behaviour (leases, retries, the
dead letter) is ``api.modes.queues``; this module only moves rows.

A claim is named by ``(consumer_id, row_id, worker_id, attempts)`` and acts only while its
lease runs: every ``*_claim_*`` function changes nothing for a claim that is no longer current.
"""

from __future__ import annotations

import json
import sqlite3
from typing import NamedTuple

from ...util.redact import redact_secrets
from ..topics import acks

ORIGIN = "queue"  # the quarantine's origin for a queue's dead jobs


class Claim(NamedTuple):
    consumer_id: int
    row_id: int
    worker_id: str
    attempts: int


# -- the queue row ---------------------------------------------------------------
def stored_settings(conn: sqlite3.Connection, topic: str, consumer: str) -> tuple[int, int] | None:
    """(visibility_timeout_ms, max_attempts) of the queue, or None when there is none."""
    row = conn.execute(
        "SELECT visibility_timeout_ms, max_attempts FROM _minikafka_queues WHERE topic = ? AND consumer = ?",
        (topic, consumer)).fetchone()
    return None if row is None else (row[0], row[1])


def save_settings_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, topic: str, consumer: str,
                                         visibility_timeout_ms: int, max_attempts: int, created_at: str) -> None:
    """Create the queue row, or update its settings when they differ."""
    conn.execute(
        "INSERT INTO _minikafka_queues (consumer_id, topic, consumer, visibility_timeout_ms, max_attempts, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (consumer_id) DO UPDATE SET "
        "visibility_timeout_ms = excluded.visibility_timeout_ms, max_attempts = excluded.max_attempts "
        "WHERE visibility_timeout_ms != excluded.visibility_timeout_ms "
        "OR max_attempts != excluded.max_attempts",
        (consumer_id, topic, consumer, visibility_timeout_ms, max_attempts, created_at),
    )


def find_queue(conn: sqlite3.Connection, topic: str, consumer: str) -> tuple[str, str] | None:
    row = conn.execute(
        "SELECT topic, consumer FROM _minikafka_queues WHERE topic = ? AND consumer = ?", (topic, consumer)
    ).fetchone()
    return None if row is None else (row[0], row[1])


def consumer_id(conn: sqlite3.Connection, topic: str, consumer: str) -> int | None:
    """The consumer id of the queue (None: there is no such queue)."""
    row = conn.execute("SELECT consumer_id FROM _minikafka_queues WHERE topic = ? AND consumer = ?",
                       (topic, consumer)).fetchone()
    return None if row is None else row[0]


def queue_pairs(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(topic, consumer) of every stored queue, sorted."""
    return [(r[0], r[1]) for r in conn.execute("SELECT topic, consumer FROM _minikafka_queues ORDER BY topic, consumer")]


def synced_upto(conn: sqlite3.Connection, consumer_id: int) -> int | None:
    """The queue's sync mark (None: the queue was dropped)."""
    row = conn.execute("SELECT synced_upto FROM _minikafka_queues WHERE consumer_id = ?", (consumer_id,)).fetchone()
    return None if row is None else row[0]


# -- jobs ------------------------------------------------------------------------
def add_job_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, row_id: int, priority: int,
                                   run_at: int) -> None:
    """A pending job for a row just appended; keeps the sync mark level when nothing else came in between."""
    conn.execute(
        "INSERT OR REPLACE INTO _minikafka_queue_jobs (consumer_id, row_id, state, priority, run_at) "
        "VALUES (?, ?, 'pending', ?, ?)",
        (consumer_id, row_id, priority, run_at),
    )
    conn.execute(
        "UPDATE _minikafka_queues SET synced_upto = ? WHERE consumer_id = ? AND synced_upto = ?",
        (row_id, consumer_id, row_id - 1),
    )


def sync_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, table: str, synced: int, top: int,
                                now: int) -> None:
    """Pending jobs for the rows of ``table`` (quoted) in ``synced..top`` still pending for the consumer."""
    where, params = acks.pending_filter(consumer_id)
    conn.execute(
        "INSERT OR IGNORE INTO _minikafka_queue_jobs (consumer_id, row_id, state, priority, run_at) "
        f"SELECT ?, \"_id\", 'pending', 0, ? FROM {table} "
        f"WHERE \"_id\" > ? AND \"_id\" <= ? AND {where}",
        (consumer_id, now, synced, top, *params),
    )
    conn.execute("UPDATE _minikafka_queues SET synced_upto = ? WHERE consumer_id = ?", (top, consumer_id))


def has_claimable(conn: sqlite3.Connection, consumer_id: int, now: int) -> bool:
    """A job pending and due, or processing with an expired lease."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM _minikafka_queue_jobs WHERE consumer_id = ? AND state = 'pending' "
        "AND run_at <= ?) OR EXISTS (SELECT 1 FROM _minikafka_queue_jobs WHERE consumer_id = ? "
        "AND state = 'processing' AND lease_expires_at <= ?)",
        (consumer_id, now, consumer_id, now),
    ).fetchone()
    return bool(row[0])


def next_times(conn: sqlite3.Connection, consumer_id: int) -> tuple[int | None, int | None]:
    """(earliest pending run_at, earliest lease expiry), each None when there is none."""
    pending = conn.execute(
        "SELECT min(run_at) FROM _minikafka_queue_jobs WHERE consumer_id = ? AND state = 'pending'", (consumer_id,)
    ).fetchone()[0]
    lease = conn.execute(
        "SELECT min(lease_expires_at) FROM _minikafka_queue_jobs WHERE consumer_id = ? AND state = 'processing'",
        (consumer_id,),
    ).fetchone()[0]
    return pending, lease


def _job_max(t: str) -> str:
    """The job's own max_attempts, else the queue's (a parameter), for the jobs-table alias ``t``."""
    return (f"coalesce((SELECT o.max_attempts FROM _minikafka_job_options o WHERE o.consumer_id = {t}.consumer_id "
            f"AND o.row_id = {t}.row_id), ?)")


def claim_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, worker_id: str, lease_until: int,
                                 max_attempts: int, now: int, n: int) -> list[tuple]:
    """Claim up to ``n`` claimable jobs with attempts left (the job's own max_attempts, else the
    queue's); (row_id, attempts, lease_expires_at, priority, run_at, max_attempts) of each, in no
    particular order."""
    return conn.execute(
        "UPDATE _minikafka_queue_jobs SET state = 'processing', worker_id = ?, lease_expires_at = ?, "
        "attempts = attempts + 1 "
        "WHERE consumer_id = ? AND row_id IN (SELECT row_id FROM _minikafka_queue_jobs j "
        "WHERE consumer_id = ? AND state IN ('pending', 'processing') "
        "AND ((state = 'pending' AND run_at <= ?) OR (state = 'processing' AND lease_expires_at <= ?)) "
        f"AND attempts < {_job_max('j')} "
        "ORDER BY priority DESC, run_at, row_id LIMIT ?) "
        f"RETURNING row_id, attempts, lease_expires_at, priority, run_at, {_job_max('_minikafka_queue_jobs')}",
        (worker_id, lease_until, consumer_id, consumer_id, now, now, max_attempts, n, max_attempts),
    ).fetchall()


_CLAIM = ("consumer_id = ? AND row_id = ? AND state = 'processing' AND worker_id = ? AND attempts = ? "
          "AND lease_expires_at > ?")


def _claim_params(claim: Claim, now: int) -> tuple:
    return (claim.consumer_id, claim.row_id, claim.worker_id, claim.attempts, now)


def delete_claim_in_current_transaction(conn: sqlite3.Connection, claim: Claim, now: int) -> int:
    """The job is done: its state row goes (1), or 0 when the claim is no longer current."""
    return conn.execute(f"DELETE FROM _minikafka_queue_jobs WHERE {_CLAIM}", _claim_params(claim, now)).rowcount


def retry_claim_in_current_transaction(conn: sqlite3.Connection, claim: Claim, now: int, run_at: int,
                                       error: str) -> int:
    return conn.execute(
        "UPDATE _minikafka_queue_jobs SET state = 'pending', run_at = ?, worker_id = NULL, lease_expires_at = NULL, "
        f"last_error = ? WHERE {_CLAIM}",
        (run_at, redact_secrets(error), *_claim_params(claim, now)),
    ).rowcount


def kill_claim_in_current_transaction(conn: sqlite3.Connection, claim: Claim, now: int, reason: str) -> int:
    return conn.execute(
        "UPDATE _minikafka_queue_jobs SET state = 'dead', worker_id = NULL, lease_expires_at = NULL, last_error = ? "
        f"WHERE {_CLAIM}",
        (redact_secrets(reason), *_claim_params(claim, now)),
    ).rowcount


def extend_lease_in_current_transaction(conn: sqlite3.Connection, claim: Claim, now: int, lease: int) -> int:
    return conn.execute(f"UPDATE _minikafka_queue_jobs SET lease_expires_at = ? WHERE {_CLAIM}",
                        (lease, *_claim_params(claim, now))).rowcount


def delete_claims_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, now: int,
                                         claims: list[tuple[int, str, int]]) -> list[int]:
    """Many jobs done at once: ``claims`` are (row_id, worker_id, attempts); returns the row ids still ours."""
    return [r[0] for r in conn.execute(
        "DELETE FROM _minikafka_queue_jobs WHERE consumer_id = ?1 AND state = 'processing' AND lease_expires_at > ?2 "
        "AND (row_id, worker_id, attempts) IN (SELECT json_extract(value, '$[0]'), "
        "json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?3)) "
        "RETURNING row_id",
        (consumer_id, now, json.dumps([list(c) for c in claims])),
    ).fetchall()]


def bury_exhausted_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, now: int, max_attempts: int,
                                          *, pending: bool = False) -> list[tuple]:
    """Claimable jobs with no attempt left turn dead; (row_id, attempts, last_error) of each.

    ``pending``: look at due pending jobs (after ``max_attempts`` was lowered) instead of expired leases.
    """
    which = "(state = 'pending' AND run_at <= ?)" if pending else "(state = 'processing' AND lease_expires_at <= ?)"
    return conn.execute(
        "UPDATE _minikafka_queue_jobs SET state = 'dead', worker_id = NULL, lease_expires_at = NULL, "
        "last_error = coalesce(nullif(last_error, ''), 'max attempts exceeded') "
        f"WHERE consumer_id = ? AND {which} AND attempts >= {_job_max('_minikafka_queue_jobs')} "
        "RETURNING row_id, attempts, last_error",
        (consumer_id, now, max_attempts),
    ).fetchall()


def bury_expired_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, now: int) -> list[tuple]:
    """Jobs past their ``expires_at`` that are pending (or whose lease ran out) turn dead with the
    reason 'expired'; (row_id, attempts, last_error) of each."""
    return conn.execute(
        "UPDATE _minikafka_queue_jobs SET state = 'dead', worker_id = NULL, lease_expires_at = NULL, "
        "last_error = 'expired' "
        "WHERE consumer_id = ?1 AND (state = 'pending' OR (state = 'processing' AND lease_expires_at <= ?2)) "
        "AND row_id IN (SELECT row_id FROM _minikafka_job_options WHERE consumer_id = ?1 "
        "AND expires_at IS NOT NULL AND expires_at <= ?2) "
        "RETURNING row_id, attempts, last_error",
        (consumer_id, now),
    ).fetchall()


def any_expiring(conn: sqlite3.Connection, consumer_id: int) -> bool:
    """Whether some job of the queue has an expiry (the claim's expiry sweep is skipped otherwise)."""
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM _minikafka_job_options WHERE consumer_id = ? AND expires_at IS NOT NULL)",
        (consumer_id,)).fetchone()[0] == 1


# -- per-job options, cancel, outcomes (q.get, q.result) --------------------------
def set_options_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, row_id: int,
                                       max_attempts: int | None, expires_at: int | None) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO _minikafka_job_options (consumer_id, row_id, max_attempts, expires_at) "
        "VALUES (?, ?, ?, ?)", (consumer_id, row_id, max_attempts, expires_at))


def forget_options_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, row_ids: list[int]) -> None:
    """Options of finished jobs go (a no-op lookup when none were given)."""
    conn.execute(
        "DELETE FROM _minikafka_job_options WHERE consumer_id = ? AND row_id IN (SELECT value FROM json_each(?))",
        (consumer_id, json.dumps([int(i) for i in row_ids])))


def job_state(conn: sqlite3.Connection, consumer_id: int, row_id: int) -> tuple | None:
    """(state, attempts, run_at, last_error, worker_id, lease_expires_at, priority, max_attempts or None,
    expires_at or None) of a live job, or None."""
    return conn.execute(
        "SELECT j.state, j.attempts, j.run_at, j.last_error, j.worker_id, j.lease_expires_at, j.priority, "
        "o.max_attempts, o.expires_at FROM _minikafka_queue_jobs j LEFT JOIN _minikafka_job_options o "
        "ON o.consumer_id = j.consumer_id AND o.row_id = j.row_id WHERE j.consumer_id = ? AND j.row_id = ?",
        (consumer_id, row_id)).fetchone()


def outcome(conn: sqlite3.Connection, consumer_id: int, row_id: int) -> tuple | None:
    """(outcome, result JSON text or None, finished_at) of a finished job still kept, or None."""
    return conn.execute(
        "SELECT outcome, result, finished_at FROM _minikafka_job_outcomes WHERE consumer_id = ? AND row_id = ?",
        (consumer_id, row_id)).fetchone()


def save_outcome_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, row_id: int, what: str,
                                        result: str | None, now: int, keep_until: int) -> None:
    """Record a finished job's outcome and prune the outcomes kept past their time.

    A cancellation is never pruned (``keep_until`` bounds only how long a result is kept): its
    row is the only trace that tells a cancelled job from a done one, both being acked rows.
    """
    prune_outcomes_in_current_transaction(conn, now)
    conn.execute(
        "INSERT OR REPLACE INTO _minikafka_job_outcomes (consumer_id, row_id, outcome, result, finished_at, "
        "keep_until) VALUES (?, ?, ?, ?, ?, ?)", (consumer_id, row_id, what, result, now, keep_until))


def prune_outcomes_in_current_transaction(conn: sqlite3.Connection, now: int) -> int:
    """Done jobs' outcomes (their results) kept past their time go; cancellations stay."""
    return conn.execute("DELETE FROM _minikafka_job_outcomes WHERE keep_until <= ? AND outcome = 'done'",
                        (now,)).rowcount


def count_outcomes(conn: sqlite3.Connection, consumer_id: int, what: str) -> int:
    """Outcomes ``what`` ('cancelled', 'done') kept for the queue."""
    return conn.execute("SELECT count(*) FROM _minikafka_job_outcomes WHERE consumer_id = ? AND outcome = ?",
                        (consumer_id, what)).fetchone()[0]


def cancel_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, row_id: int) -> bool:
    """A pending or processing job leaves the state table (a holder's later ack finds no claim)."""
    return conn.execute(
        "DELETE FROM _minikafka_queue_jobs WHERE consumer_id = ? AND row_id = ? AND state IN ('pending', 'processing')",
        (consumer_id, row_id)).rowcount == 1


def revive_dead_in_current_transaction(conn: sqlite3.Connection, consumer_id: int, row_ids: list[int],
                                       now_ms: int) -> list[int]:
    """Dead rows of a queue back to pending with fresh attempts; returns the row ids moved.

    An expiry (``expires_at``) already past is cleared: the job was requeued to run. The caller removes their quarantine rows (``Queue.requeue``, or the generic quarantine
    requeue for rows whose ``origin`` is ``'queue'``).
    """
    moved = [r[0] for r in conn.execute(
        "UPDATE _minikafka_queue_jobs SET state = 'pending', attempts = 0, run_at = ?, worker_id = NULL, "
        "lease_expires_at = NULL WHERE consumer_id = ? AND state = 'dead' "
        "AND row_id IN (SELECT value FROM json_each(?)) RETURNING row_id",
        (now_ms, consumer_id, json.dumps([int(i) for i in row_ids])),
    ).fetchall()]
    if moved:  # an expiry already past would send the job straight back to the dead letter
        conn.execute(
            "UPDATE _minikafka_job_options SET expires_at = NULL WHERE consumer_id = ? AND expires_at <= ? "
            "AND row_id IN (SELECT value FROM json_each(?))", (consumer_id, now_ms, json.dumps(moved)))
    return moved


def dead_row_ids(conn: sqlite3.Connection, consumer_id: int) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT row_id FROM _minikafka_queue_jobs WHERE consumer_id = ? AND state = 'dead'", (consumer_id,))]


def dead_jobs(conn: sqlite3.Connection, consumer_id: int, topic: str, consumer: str, limit: int) -> list[tuple]:
    """(quarantine id, row_id, attempts, last_error, died_at) of the dead jobs in the quarantine, oldest first."""
    return conn.execute(
        "SELECT q.id, q.row_id, j.attempts, j.last_error, q.created_at FROM _minikafka_quarantine q "
        "JOIN _minikafka_queue_jobs j ON j.consumer_id = ? AND j.row_id = q.row_id AND j.state = 'dead' "
        "WHERE q.topic = ? AND q.consumer = ? AND q.origin = ? ORDER BY q.id LIMIT ?",
        (consumer_id, topic, consumer, ORIGIN, limit),
    ).fetchall()


def forget_dead_in_current_transaction(conn: sqlite3.Connection, topic: str, consumer: str,
                                       row_ids: list[int]) -> None:
    """Remove revived jobs' rows from the quarantine."""
    conn.execute(
        "DELETE FROM _minikafka_quarantine WHERE topic = ? AND consumer = ? AND origin = ? "
        "AND row_id IN (SELECT value FROM json_each(?))",
        (topic, consumer, ORIGIN, json.dumps(row_ids)),
    )


def list_jobs(conn: sqlite3.Connection, consumer_id: int, *, state: str | None = None,
              limit: int = 100) -> list[tuple]:
    """(row_id, state, attempts, run_at ms, last_error, worker_id, lease_expires_at ms, priority) of the
    queue's live jobs (pending, processing or dead; of ``state`` only), oldest first."""
    where, params = "consumer_id = ?", [consumer_id]
    if state:
        where += " AND state = ?"
        params.append(state)
    return conn.execute(
        "SELECT row_id, state, attempts, run_at, last_error, worker_id, lease_expires_at, priority "
        f"FROM _minikafka_queue_jobs WHERE {where} ORDER BY row_id LIMIT ?", (*params, limit)).fetchall()


def list_outcomes(conn: sqlite3.Connection, consumer_id: int, *, limit: int = 100) -> list[tuple]:
    """(row_id, outcome, result JSON text or None, finished_at ms) of the finished jobs still kept,
    most recently finished first."""
    return conn.execute(
        "SELECT row_id, outcome, result, finished_at FROM _minikafka_job_outcomes WHERE consumer_id = ? "
        "ORDER BY finished_at DESC, row_id DESC LIMIT ?", (consumer_id, limit)).fetchall()


def state_counts(conn: sqlite3.Connection, consumer_id: int, now: int) -> dict[str, int]:
    """Jobs by state, an expired lease counted as pending."""
    return dict(conn.execute(
        "SELECT CASE WHEN state = 'processing' AND lease_expires_at <= ? THEN 'pending' ELSE state END, "
        "count(*) FROM _minikafka_queue_jobs WHERE consumer_id = ? GROUP BY 1",
        (now, consumer_id),
    ).fetchall())


def count_unsynced(conn: sqlite3.Connection, consumer_id: int, table: str, synced: int) -> int:
    """Rows of ``table`` (quoted) above the sync mark, pending for the consumer, with no job row yet."""
    where, params = acks.pending_filter(consumer_id)
    return conn.execute(
        f"SELECT count(*) FROM {table} t WHERE \"_id\" > ? AND {where} "
        "AND NOT EXISTS (SELECT 1 FROM _minikafka_queue_jobs j WHERE j.consumer_id = ? AND j.row_id = t.\"_id\")",
        (synced, *params, consumer_id),
    ).fetchone()[0]


def count_dead(conn: sqlite3.Connection, consumer_id: int, topic: str, consumer: str) -> int:
    """Dead jobs still in the quarantine (purging the quarantine forgets them)."""
    return conn.execute(
        "SELECT count(*) FROM _minikafka_queue_jobs j WHERE j.consumer_id = ? AND j.state = 'dead' AND EXISTS "
        "(SELECT 1 FROM _minikafka_quarantine q WHERE q.topic = ? AND q.consumer = ? AND q.origin = ? "
        "AND q.row_id = j.row_id)",
        (consumer_id, topic, consumer, ORIGIN),
    ).fetchone()[0]

"""The ledger's own tables (DDL in one place).

Each feature's tables are one block in ``PARTS``; a new feature adds its block here.
The statements run only when something is missing (a new file, an older format, a
block added since the file was written), and then only for a Source opened for
writing: opening a current ledger writes nothing (see connection.py).
"""

from __future__ import annotations

import functools
import re
import sqlite3

# 1: first release. 2: partitions (catalog partitions/key, "_partition" on topic tables,
# partition on acks), committed offsets. 3: positions and acks are the only ack state (no
# "_status"/"_handled_at" columns; rows handled for everyone in _minikafka_handled), and
# each topic has its status views (status.py). 4: run status 'interrupted' (Ctrl-C). 5: only
# topics with several partitions index "_partition". 6: row marks (counts.py) so counts
# do not scan. Older files are upgraded on open (upgrade.py).
LEDGER_FORMAT = 6
MIN_SQLITE = (3, 37, 0)  # STRICT tables

CORE = """
CREATE TABLE IF NOT EXISTS _minikafka_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS _minikafka_topics (
    name TEXT PRIMARY KEY COLLATE NOCASE,
    model_name TEXT NOT NULL,
    json_schema TEXT NOT NULL CHECK (json_valid(json_schema)),
    fingerprint TEXT NOT NULL,
    columns TEXT NOT NULL CHECK (json_valid(columns)),
    dedup TEXT NOT NULL CHECK (json_valid(dedup)),
    created_at TEXT NOT NULL,
    migrated_at TEXT,
    partitions INTEGER NOT NULL DEFAULT 1,
    key TEXT NOT NULL DEFAULT '[]'
) STRICT;

CREATE TABLE IF NOT EXISTS _minikafka_consumers (
    id INTEGER PRIMARY KEY,
    topic TEXT NOT NULL REFERENCES _minikafka_topics(name) ON DELETE CASCADE,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (topic, name)
) STRICT;

-- Rows a consumer acked above its committed offset (out of order). They fold into the
-- committed offset as soon as the rows below them are done, and are deleted once every
-- consumer is past the row, so the table holds the out-of-order backlog, never history.
CREATE TABLE IF NOT EXISTS _minikafka_acks (
    consumer_id INTEGER NOT NULL REFERENCES _minikafka_consumers(id) ON DELETE CASCADE,
    row_id INTEGER NOT NULL,
    acked_at TEXT NOT NULL,
    partition INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer_id, row_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS _minikafka_acks_by_row ON _minikafka_acks (row_id, consumer_id);

CREATE TABLE IF NOT EXISTS _minikafka_attempts (
    consumer_id INTEGER NOT NULL REFERENCES _minikafka_consumers(id) ON DELETE CASCADE,
    row_id INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    last_error TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (consumer_id, row_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS _minikafka_runs (
    run_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    stage TEXT,
    consumer TEXT,
    inputs TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(inputs)),
    outputs TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(outputs)),
    watermarks TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(watermarks)),
    rows_in INTEGER NOT NULL DEFAULT 0,
    rows_out INTEGER NOT NULL DEFAULT 0,
    rows_duplicate INTEGER NOT NULL DEFAULT 0,
    rows_failed INTEGER NOT NULL DEFAULT 0,
    rows_quarantined INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'partial', 'interrupted')),
    error TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    duration_s REAL,
    quality TEXT CHECK (quality IS NULL OR json_valid(quality)),
    details TEXT CHECK (details IS NULL OR json_valid(details))
) STRICT;
CREATE INDEX IF NOT EXISTS _minikafka_runs_by_stage ON _minikafka_runs (stage, started_at);
-- the run log newest first (status, the console's runs page) along an index, never a sort of history
CREATE INDEX IF NOT EXISTS _minikafka_runs_by_start ON _minikafka_runs (started_at);

CREATE TABLE IF NOT EXISTS _minikafka_quarantine (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    consumer TEXT,
    run_id TEXT,
    row_id INTEGER,
    payload TEXT,
    reason TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 1,
    origin TEXT,
    created_at TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS _minikafka_quarantine_by_topic ON _minikafka_quarantine (topic, id);
"""

# Windowed streams (api/modes/streaming.py): a window's bounds are stored before its function
# runs, so a crash or an exception offers the same window again; committing it acks its
# rows in the same transaction. Retention settings and followed-file positions too.
STREAMS = """
CREATE TABLE IF NOT EXISTS _minikafka_windows (
    consumer_id INTEGER NOT NULL REFERENCES _minikafka_consumers(id) ON DELETE CASCADE,
    window_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    first_offset INTEGER NOT NULL,
    last_offset INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    row_ids TEXT CHECK (row_ids IS NULL OR json_valid(row_ids)),
    start TEXT,
    "end" TEXT,
    state TEXT NOT NULL CHECK (state IN ('open', 'committed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    run_id TEXT,
    created_at TEXT NOT NULL,
    committed_at TEXT,
    PRIMARY KEY (consumer_id, window_id)
) STRICT;
CREATE INDEX IF NOT EXISTS _minikafka_windows_open ON _minikafka_windows (consumer_id, window_id)
    WHERE state = 'open';

CREATE TABLE IF NOT EXISTS _minikafka_retention (
    topic TEXT PRIMARY KEY REFERENCES _minikafka_topics(name) ON DELETE CASCADE,
    max_age_s REAL NOT NULL CHECK (max_age_s > 0),
    updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS _minikafka_positions (
    key TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    position TEXT NOT NULL CHECK (json_valid(position)),
    updated_at TEXT NOT NULL
) STRICT;
"""


# Offsets (see status.py, acks.py): a consumer's committed position per partition, and per
# topic partition the position below which rows were handled for every consumer by a
# topic-wide ack, plus such rows above it. A group commit moves one row here, whatever it
# covers; a topic-wide ack in order moves handled_upto, out of order it adds one row.
OFFSETS = """
CREATE TABLE IF NOT EXISTS _minikafka_offsets (
    consumer_id INTEGER NOT NULL REFERENCES _minikafka_consumers(id) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    committed INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (consumer_id, partition)
) STRICT, WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS _minikafka_partitions (
    topic TEXT NOT NULL REFERENCES _minikafka_topics(name) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    handled_upto INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT,
    PRIMARY KEY (topic, partition)
) STRICT, WITHOUT ROWID;

-- Rows handled for every consumer above their partition's handled_upto (acked out of
-- order). They fold into handled_upto as soon as the rows below them are handled too.
CREATE TABLE IF NOT EXISTS _minikafka_handled (
    topic TEXT NOT NULL REFERENCES _minikafka_topics(name) ON DELETE CASCADE,
    row_id INTEGER NOT NULL,
    partition INTEGER NOT NULL DEFAULT 0,
    handled_at TEXT NOT NULL,
    PRIMARY KEY (topic, row_id)
) STRICT, WITHOUT ROWID;

-- The batch an HTTP delivery has in flight per (group, partition): written before the
-- POST, deleted with the commit, so a restart re-sends exactly that batch (same
-- Idempotency-Key) and attempts count across restarts.
CREATE TABLE IF NOT EXISTS _minikafka_inflight (
    consumer_id INTEGER NOT NULL REFERENCES _minikafka_consumers(id) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    first_offset INTEGER NOT NULL,
    last_offset INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (consumer_id, partition)
) STRICT, WITHOUT ROWID;
"""

# Work queues (api/modes/queues.py, ledger/consuming/queues.py): a queue is one consumer of a topic. Per-row state lives here
# only while a row is live (pending, processing) or dead; an acked row leaves this table and
# stays in its topic as history, acked for the queue's consumer. Times are milliseconds
# since the Unix epoch (UTC). Dead rows are also copied to _minikafka_quarantine.
QUEUES = """
CREATE TABLE IF NOT EXISTS _minikafka_queues (
    consumer_id INTEGER PRIMARY KEY REFERENCES _minikafka_consumers(id) ON DELETE CASCADE,
    topic TEXT NOT NULL,
    consumer TEXT NOT NULL,
    visibility_timeout_ms INTEGER NOT NULL CHECK (visibility_timeout_ms > 0),
    max_attempts INTEGER NOT NULL CHECK (max_attempts > 0),
    synced_upto INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    UNIQUE (topic, consumer)
) STRICT;

CREATE TABLE IF NOT EXISTS _minikafka_queue_jobs (
    consumer_id INTEGER NOT NULL REFERENCES _minikafka_queues(consumer_id) ON DELETE CASCADE,
    row_id INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'processing', 'dead')),
    priority INTEGER NOT NULL DEFAULT 0,
    run_at INTEGER NOT NULL,
    worker_id TEXT,
    lease_expires_at INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    PRIMARY KEY (consumer_id, row_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS _minikafka_queue_jobs_claim
    ON _minikafka_queue_jobs (consumer_id, priority DESC, run_at, row_id)
    WHERE state IN ('pending', 'processing');
CREATE INDEX IF NOT EXISTS _minikafka_queue_jobs_due
    ON _minikafka_queue_jobs (consumer_id, run_at) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS _minikafka_queue_jobs_leases
    ON _minikafka_queue_jobs (consumer_id, lease_expires_at) WHERE state = 'processing';
"""

# Notifications (tx.notify / source.listen): written in the caller's transaction, read by
# listeners that start at the current maximum id; pruned only on request.
NOTIFICATIONS = """
CREATE TABLE IF NOT EXISTS _minikafka_notifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    payload TEXT CHECK (payload IS NULL OR json_valid(payload)),
    created_at TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS _minikafka_notifications_by_channel ON _minikafka_notifications (channel, id);
"""

# HTTP delivery (ledger/consuming/deliveries.py): which worker delivers a group's partition now. A
# worker takes the lease before it fetches and renews it while it delivers; every write
# of a batch checks it, so two workers never deliver one partition at once. Times are
# milliseconds since the Unix epoch (UTC).
DELIVERIES = """
CREATE TABLE IF NOT EXISTS _minikafka_delivery_leases (
    consumer_id INTEGER NOT NULL REFERENCES _minikafka_consumers(id) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    owner TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (consumer_id, partition)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS _minikafka_delivery_leases_by_owner ON _minikafka_delivery_leases (owner);
"""

# Backfill progress (ledger/consuming/loads.py): per topic and file content, the last line committed
# by an interrupted load ('partial'), or 'done' for a file fully loaded.
LOADS = """
CREATE TABLE IF NOT EXISTS _minikafka_loads (
    topic TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    file TEXT NOT NULL,
    rows_done INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL CHECK (status IN ('partial', 'done')),
    run_id TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (topic, sha256)
) STRICT;
"""

# every block, in creation order
# Per-job options given at enqueue (max_attempts, expires_at) and the outcome of a finished
# job (done with its result, or cancelled) kept until keep_until (ms): what q.get/q.result read.
JOBS = """
CREATE TABLE IF NOT EXISTS _minikafka_job_options (
    consumer_id INTEGER NOT NULL REFERENCES _minikafka_queues(consumer_id) ON DELETE CASCADE,
    row_id INTEGER NOT NULL,
    max_attempts INTEGER CHECK (max_attempts IS NULL OR max_attempts > 0),
    expires_at INTEGER,
    PRIMARY KEY (consumer_id, row_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS _minikafka_job_options_expiry
    ON _minikafka_job_options (consumer_id, expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS _minikafka_job_outcomes (
    consumer_id INTEGER NOT NULL REFERENCES _minikafka_queues(consumer_id) ON DELETE CASCADE,
    row_id INTEGER NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('done', 'cancelled')),
    result TEXT CHECK (result IS NULL OR json_valid(result)),
    finished_at INTEGER NOT NULL,
    keep_until INTEGER NOT NULL,
    PRIMARY KEY (consumer_id, row_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS _minikafka_job_outcomes_expiry ON _minikafka_job_outcomes (keep_until);
"""

# Periodic jobs: one row per schedule of a queue; one row per fired due time (the UNIQUE key
# that makes a due time fire once across processes; row_id NULL: the fire was skipped); the
# last failure of a schedule that could not fire and how many fires it skipped; leader
# leases (expiring rows).
SCHEDULES = """
CREATE TABLE IF NOT EXISTS _minikafka_schedules (
    name TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    consumer TEXT NOT NULL,
    cron TEXT,
    every_ms INTEGER CHECK (every_ms IS NULL OR every_ms > 0),
    payload TEXT NOT NULL CHECK (json_valid(payload)),
    priority INTEGER NOT NULL DEFAULT 0,
    max_catch_up INTEGER NOT NULL DEFAULT 1 CHECK (max_catch_up >= 0),
    paused INTEGER NOT NULL DEFAULT 0,
    next_due INTEGER NOT NULL,
    last_fired INTEGER,
    created_at TEXT NOT NULL,
    CHECK ((cron IS NULL) != (every_ms IS NULL))
) STRICT;

CREATE TABLE IF NOT EXISTS _minikafka_schedule_fires (
    schedule TEXT NOT NULL,
    due INTEGER NOT NULL,
    row_id INTEGER,
    fired_at INTEGER NOT NULL,
    PRIMARY KEY (schedule, due)
) STRICT, WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS _minikafka_schedule_errors (
    schedule TEXT PRIMARY KEY,
    due INTEGER NOT NULL,
    error TEXT NOT NULL,
    at INTEGER NOT NULL,
    skipped INTEGER NOT NULL DEFAULT 1
) STRICT, WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS _minikafka_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
"""

# Row marks (counts.py): partition ``partition`` of ``topic`` holds ``rows`` rows with
# ids up to ``upto``. Written with the rows they count, at least every few thousand rows.
ROW_COUNTS = """
CREATE TABLE IF NOT EXISTS _minikafka_row_counts (
    topic TEXT NOT NULL REFERENCES _minikafka_topics(name) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    upto INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    PRIMARY KEY (topic, partition, upto)
) STRICT, WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS _minikafka_row_counts_by_id ON _minikafka_row_counts (topic, upto);
"""

# Keyed tables (keyed.py): which topics keep one current row per key, their key fields and
# merge functions. A table's map and superseded marks are its own tables ("<topic>__current",
# "<topic>__superseded"), made with it.
TABLES = """
CREATE TABLE IF NOT EXISTS _minikafka_tables (
    topic TEXT PRIMARY KEY COLLATE NOCASE REFERENCES _minikafka_topics(name) ON DELETE CASCADE,
    key TEXT NOT NULL CHECK (json_valid(key)),
    merge TEXT NOT NULL CHECK (json_valid(merge)),
    created_at TEXT NOT NULL
) STRICT;
"""

# OpenLineage (pipelines/lineage.py): each stage run whose START event was sent, the process
# that sent it, and the terminal event sent for it (NULL until one is), so the next run sends
# a FAIL for a run whose process was killed before it could.
LINEAGE = """
CREATE TABLE IF NOT EXISTS _minikafka_lineage (
    run_id TEXT PRIMARY KEY,
    pipeline TEXT NOT NULL,
    stage TEXT NOT NULL,
    started_at TEXT NOT NULL,
    process TEXT NOT NULL CHECK (json_valid(process)),
    ended TEXT CHECK (ended IN ('COMPLETE', 'FAIL', 'ABORT'))
) STRICT;
CREATE INDEX IF NOT EXISTS _minikafka_lineage_open ON _minikafka_lineage(pipeline) WHERE ended IS NULL;
"""

PARTS: list[str] = [CORE, OFFSETS, STREAMS, QUEUES, NOTIFICATIONS, DELIVERIES, JOBS, SCHEDULES, LOADS, ROW_COUNTS,
                    TABLES, LINEAGE]


def schema_statements() -> list[str]:
    """Every CREATE statement of every block, in order."""
    return [s for part in PARTS for s in _split_statements(part)]


def _split_statements(script: str) -> list[str]:
    statements, buf = [], []
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        buf.append(line)
        if line.rstrip().endswith(";"):
            statements.append("\n".join(buf))
            buf = []
    return [s for s in statements if s.strip()]


_NAMED = re.compile(r"CREATE\s+(TABLE|INDEX|TRIGGER|VIEW)\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.IGNORECASE)


@functools.cache
def schema_objects() -> tuple[tuple[str, str, str], ...]:
    """(kind 'table'/'index'/..., name, CREATE statement) of every ``CREATE ... IF NOT EXISTS
    name`` statement, in order (a test checks that every statement has that form). Parsed
    once per process: every Source open compares it with the file."""
    out = []
    for statement in schema_statements():
        m = _NAMED.search(statement)
        if m is not None:
            out.append((m.group(1).lower(), m.group(2), statement))
    return tuple(out)


def missing_objects(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """The schema objects (as ``schema_objects``) not in the file: a read, never a write."""
    present = set(conn.execute("SELECT type, name FROM main.sqlite_schema"))
    return [obj for obj in schema_objects() if (obj[0], obj[1]) not in present]


def temp_table_statement(statement: str) -> str:
    """A table's CREATE statement as a TEMP table: an empty stand-in for a read-only open."""
    return re.sub(r"^\s*CREATE\s+TABLE", "CREATE TEMP TABLE", statement, count=1, flags=re.IGNORECASE)

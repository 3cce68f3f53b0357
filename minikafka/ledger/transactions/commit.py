"""The two commits, side by side: a stage's (``commit_stage``) and a backfill's (``commit_slices``).

A stage's commit is one SQLite transaction that makes its work durable, or nothing.
Inside one ``BEGIN IMMEDIATE`` it
1. inserts each output topic's staged rows, streamed in Arrow batches (driver memory is
   bounded by one batch), skipping rows whose dedup key the target already holds
   and keys repeated inside the batch (``ON CONFLICT DO NOTHING`` on the unique dedup
   index: an anti-join whose cost grows with the new rows, not with the target's history);
   an output that is a keyed table is merged by key instead (``keyed.merge_rows_in_current_transaction``:
   a version per new or changed key; ``rows_out`` counts versions, ``rows_duplicate`` the rows
   that wrote none, and ``details["tables"]`` the inserted / updated / unchanged keys);
2. records per-row failures (attempts; after ``max_attempts`` the row is quarantined);
3. acks, for the stage's consumer, exactly the rows that were pending up to the
   high-watermark taken when the stage started, less the rows that failed;
4. writes the run record, which is the commit marker, with the counts per topic in its
   details (``rows_by_topic``: per input the rows read, acked, failed and quarantined; per
   output the rows written, skipped as duplicates and quarantined).

An output's dedup keeps the first row of a key: a row whose key the target holds, or an
earlier row of the same commit holds (in its batch or an earlier batch), is skipped and
counted as a duplicate.

A crash before COMMIT leaves the ledger as it was (the inputs are still pending and a
re-run recomputes them); after COMMIT the inputs are acked and a re-run finds nothing.
No Spark here: the staged batches can come from Spark, a backfill, or a test.

A backfill's commit takes a dump's rows in slices of consecutive lines (``LoadSlice``, cut by
``spark/loading/loadcommit.py``), one transaction each: the slice's rows (duplicates of the
dedup key skipped; as handled when asked), its refused lines into the quarantine with
``file:line``, and the file's progress (``loads.py``). A crash leaves whole slices: a re-run
skips exactly the lines whose slice committed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...errors import ConcurrentRunError, InvalidRecordError
from ...util.clock import utc_now
from ...util.faults import checkpoint
from ...util.gcpause import gc_paused
from ..consuming import loads
from ..consuming.quarantine import Quarantined, quarantine_in_current_transaction
from ..consuming.runlog import RunResult, write_run_in_current_transaction
from ..topics import acks, bulk, keyed
from ..topics.catalog import read_layout
from ..topics.layout import TopicLayout
from ..topics.table import TopicTable
from .connection import Ledger


@dataclass
class StagedOutput:
    """Rows for one output topic, in storage form, as Arrow record batches.

    Each batch holds the topic's field columns and optionally ``_parent_id`` and
    ``_parent_topic`` (lineage).
    """

    layout: TopicLayout
    batches: Iterable[Any]


@dataclass
class InputState:
    """One consumed topic: its high-watermark and the rows expected pending at commit."""

    topic: str
    upto: int
    pending: int
    failures: dict[int, str] = field(default_factory=dict)
    partitions: tuple[int, ...] | None = None  # only these topic partitions (None: all)
    consumer_id: int | None = None  # resolved when the stage was planned (None: registered here)


def commit_stage(ledger: Ledger, run: RunResult, *, consumer: str, inputs: list[InputState],
                 outputs: list[StagedOutput], max_attempts: int | None = None,
                 default_parent_topic: str | None = None,
                 quarantine: list[tuple] | Callable[[], list[tuple]] = (),
                 finishers: Sequence[Callable[[sqlite3.Connection, RunResult], None]] = ()) -> RunResult:
    """Commit a stage's outputs and acks in one transaction; fill in ``run``'s counts.

    ``finishers`` run inside the transaction after the acks, before the run row (e.g. a lake
    table's pointer swap, ``ledger/lake``): what they write commits or rolls back with the rest.
    A finisher may also watch the rows an output stores as they are inserted (``watch_output``,
    see :class:`OutputWatcher`), and is told when the transaction is over (``release``).

    ``quarantine`` holds output rows that failed a row-level expectation or that the
    ledger refuses: (topic, parent id, JSON payload, reason); or a function returning
    them, called once the outputs are inserted (when the outputs are still being written
    as the commit reads them, the refused rows are known only at the end).

    Raises:
        ConcurrentRunError: the consumer's pending rows changed since the stage started.
        InvalidRecordError: a staged row cannot be stored (names topic, row and field).
    """
    now = utc_now()
    counts = (run.rows_out, run.rows_duplicate, run.rows_quarantined, run.rows_failed)
    tables = json.loads(json.dumps(run.details["tables"])) if run.details and "tables" in run.details else None
    by_topic = run.details.get(BY_TOPIC) if run.details else None
    try:
        with bulk.page_cache(ledger.conn, [o.layout.name for o in outputs]):  # the outputs' key indexes
            try:
                _commit_in_transaction(ledger, run, now, consumer=consumer, inputs=inputs, outputs=outputs,
                                       max_attempts=max_attempts, default_parent_topic=default_parent_topic,
                                       quarantine=quarantine, finishers=finishers)
            finally:
                for finish in finishers:
                    release = getattr(finish, "release", None)
                    if release is not None:
                        release()
    except BaseException:  # rolled back: the run's counts say what is committed, which is nothing of this
        run.rows_out, run.rows_duplicate, run.rows_quarantined, run.rows_failed = counts
        if run.details is not None:
            run.details.pop("tables", None)
            run.details.pop(BY_TOPIC, None)
        if tables is not None:
            run.details["tables"] = tables
        if by_topic is not None:
            run.details[BY_TOPIC] = by_topic
        raise
    checkpoint("commit:after-commit")
    return run


BY_TOPIC = "rows_by_topic"  # the run's details key of its counts per topic (``consuming.runview.rows_by_topic``)


def _counts_by_topic(inputs: list[InputState], outputs: list[StagedOutput]) -> dict[str, dict[str, dict[str, int]]]:
    return {"inputs": {s.topic: {"read": s.pending, "acked": 0, "failed": 0, "quarantined": 0} for s in inputs},
            "outputs": {o.layout.name: {"written": 0, "duplicate": 0, "quarantined": 0} for o in outputs}}


def _commit_in_transaction(ledger: Ledger, run: RunResult, now: str, *, consumer: str, inputs: list[InputState],
                           outputs: list[StagedOutput], max_attempts: int | None, default_parent_topic: str | None,
                           quarantine: list[tuple] | Callable[[], list[tuple]],
                           finishers: Sequence[Callable[[sqlite3.Connection, RunResult], None]] = ()) -> None:
    by_topic = _counts_by_topic(inputs, outputs)
    with gc_paused(), ledger.atomic() as conn:
        consumer_ids = {}
        for state in inputs:
            cid = state.consumer_id
            if cid is None:  # a dry run of a stage whose consumer is new: registered, then rolled back
                cid = acks.register_consumer_in_current_transaction(conn, state.topic, consumer, now)
            consumer_ids[state.topic] = cid
            still = acks.count_pending(conn, state.topic, cid, state.upto, state.partitions)
            if still != state.pending:
                raise ConcurrentRunError(
                    f"topic {state.topic!r}: {state.pending - still} of the {state.pending} rows read by consumer "
                    f"{consumer!r} were acked by another run meanwhile; nothing was committed, re-run the stage"
                )
        for output in outputs:
            written, duplicates = _insert_output(conn, output, run, now, default_parent_topic, finishers)
            counted = by_topic["outputs"][output.layout.name]
            counted["written"] += written
            counted["duplicate"] += duplicates
        if callable(quarantine):
            quarantine = quarantine()
        quarantine_in_current_transaction(conn, (
            Quarantined(topic, payload, reason, "quality", now, consumer=consumer, run_id=run.run_id, row_id=parent_id)
            for topic, parent_id, payload, reason in quarantine))
        run.rows_quarantined += len(quarantine)
        for topic, *_ in quarantine:
            side = "outputs" if topic in by_topic["outputs"] or topic not in by_topic["inputs"] else "inputs"
            by_topic[side].setdefault(topic, {"written": 0, "duplicate": 0, "quarantined": 0})["quarantined"] += 1
        checkpoint("commit:outputs-inserted")
        for state in inputs:
            failed, set_aside = _settle_input(conn, state, consumer_ids[state.topic], consumer, run, now, max_attempts)
            by_topic["inputs"][state.topic].update(acked=state.pending - failed, failed=failed, quarantined=set_aside)
        if run.details is None:
            run.details = {}
        run.details[BY_TOPIC] = by_topic
        for finish in finishers:
            finish(conn, run)
        if run.rows_failed:
            run.finish("partial", f"{run.rows_failed} row(s) failed and stay pending for a retry")
        elif run.status == "running":
            run.finish("succeeded")
        write_run_in_current_transaction(conn, run)
        checkpoint("commit:before-commit")


class OutputWatcher(Protocol):
    """A finisher that also watches the rows an output stores, as the commit inserts them (a
    lake table that writes its data files from them, ``ledger/lake``)."""

    def watch_output(self, conn: sqlite3.Connection, layout: TopicLayout) -> Callable[[Any, int | None], None] | None:
        """A callable taking each inserted batch of ``layout``'s output and the id of its first
        row when all its rows were stored in order under consecutive ids, else None
        (``TopicTable.insert_arrow_in_current_transaction``); None: not watched."""

    def release(self) -> None:
        """The transaction is over (committed or rolled back): let go of what was watched."""


def _watchers(conn: sqlite3.Connection, layout: TopicLayout, finishers: Sequence[Callable]) -> Callable | None:
    watching = [w for f in finishers if hasattr(f, "watch_output") and (w := f.watch_output(conn, layout))]
    if not watching:
        return None
    if len(watching) == 1:
        return watching[0]

    def each(batch, first_id) -> None:
        for watch in watching:
            watch(batch, first_id)

    return each


def _insert_output(conn: sqlite3.Connection, output: StagedOutput, run: RunResult, now: str,
                   default_parent_topic: str | None, finishers: Sequence[Callable] = ()) -> tuple[int, int]:
    """Insert (or merge) one output's rows; count them into ``run``; return (written, duplicates)."""
    spec = keyed.table_spec(conn, output.layout.name)
    try:
        if spec is not None:
            return _merge_output(conn, output, spec, run, now, default_parent_topic)
        written, duplicates = TopicTable(conn, output.layout).insert_arrow_in_current_transaction(
            output.batches, now, run.run_id, default_parent_topic=default_parent_topic,
            stored_batch=_watchers(conn, output.layout, finishers))
    except InvalidRecordError as err:
        raise InvalidRecordError(f"{err} (output row of the stage; nothing was committed)") from None
    run.rows_out += written
    run.rows_duplicate += duplicates
    return written, duplicates


def _merge_output(conn: sqlite3.Connection, output: StagedOutput, spec: keyed.TableSpec, run: RunResult, now: str,
                  default_parent_topic: str | None) -> tuple[int, int]:
    """An output into a keyed table: its rows merged by key (``keyed.merge_rows_in_current_transaction``)
    in this transaction. ``rows_out`` counts the versions written; ``rows_duplicate`` the rows
    that left their key's row as it was (an unchanged key); ``details["tables"][topic]`` says
    how many keys were inserted, updated and unchanged."""
    merged = keyed.merge_rows_in_current_transaction(conn, output.layout, output.batches, now, run.run_id, spec=spec,
                                                     default_parent_topic=default_parent_topic)
    run.rows_out += merged.versions
    run.rows_duplicate += merged.rows - merged.versions
    if run.details is None:
        run.details = {}
    tables = run.details.setdefault("tables", {})
    counts = tables.setdefault(output.layout.name, {"rows": 0, "inserted": 0, "updated": 0, "unchanged": 0})
    counts["rows"] += merged.rows
    counts["inserted"] += merged.inserted
    counts["updated"] += merged.updated
    counts["unchanged"] += merged.unchanged
    return merged.versions, merged.rows - merged.versions


def _settle_input(conn: sqlite3.Connection, state: InputState, consumer_id: int, consumer: str,
                  run: RunResult, now: str, max_attempts: int | None) -> tuple[int, int]:
    """Record the input's failed rows, ack the rest; return (rows left pending, rows quarantined)."""
    keep_pending: list[int] = []
    set_aside = 0
    layout = read_layout(conn, state.topic) if state.failures else None
    for row_id, error in state.failures.items():
        attempts = conn.execute(
            "INSERT INTO _minikafka_attempts (consumer_id, row_id, attempts, last_error, updated_at) "
            "VALUES (?, ?, 1, ?, ?) ON CONFLICT (consumer_id, row_id) DO UPDATE SET "
            "attempts = attempts + 1, last_error = excluded.last_error, updated_at = excluded.updated_at "
            "RETURNING attempts",
            (consumer_id, row_id, error, now),
        ).fetchone()[0]
        if max_attempts is not None and attempts >= max_attempts:
            payload = _row_payload(conn, layout, row_id)
            quarantine_in_current_transaction(conn, [Quarantined(
                state.topic, payload, error, "stage", now, consumer=consumer, run_id=run.run_id, row_id=row_id,
                attempts=attempts)])
            conn.execute("DELETE FROM _minikafka_attempts WHERE consumer_id = ? AND row_id = ?", (consumer_id, row_id))
            run.rows_quarantined += 1
            set_aside += 1
        else:
            keep_pending.append(row_id)
            run.rows_failed += 1
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS mk_exclude (id INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM temp.mk_exclude")
    if keep_pending:
        conn.executemany("INSERT INTO temp.mk_exclude (id) VALUES (?)", [(i,) for i in keep_pending])
    acks.ack_upto_in_current_transaction(conn, state.topic, consumer_id, state.upto, now, exclude=bool(keep_pending),
                                         partitions=state.partitions, count=False)
    conn.execute(
        "DELETE FROM _minikafka_attempts WHERE consumer_id = ? AND row_id <= ? AND row_id NOT IN "
        "(SELECT id FROM temp.mk_exclude)",
        (consumer_id, state.upto),
    )
    return len(keep_pending), set_aside


def _row_payload(conn: sqlite3.Connection, layout: TopicLayout, row_id: int) -> str | None:
    row = TopicTable(conn, layout).row(row_id)
    if row is None:
        return None
    return json.dumps(layout.decoder()(row), default=str, ensure_ascii=False)


@dataclass
class LoadSlice:
    """Consecutive lines of one file: how many were read, the last of them, its accepted
    rows (``insert`` stores them with the caller's transaction and returns how many were
    stored) and its refused lines as (line, error, payload)."""

    rows_read: int
    last_line: int
    accepted: int
    refused: list[tuple[int, str, str | None]]
    now: str
    insert: Callable[[sqlite3.Connection, int], int] | None  # (conn, highest id before) -> rows stored
    committed_before: bool = False  # every line of it was committed by an interrupted run


def commit_slices(ledger: Ledger, layout: TopicLayout, file_name: str, sha256: str, slices: Iterable[LoadSlice],
                  run: RunResult, result, *, as_handled: bool, progress) -> None:
    """Commit each slice in its own transaction, with its quarantined lines and the file's
    progress; count into ``run`` and ``result`` (``rows_read``)."""
    t0 = time.perf_counter()
    rows = run.details.get("transaction_rows", 0)
    try:
        with bulk.page_cache(ledger.conn, layout.name, extra_bytes=rows * bulk.ROW_BYTES):  # the key index in cache
            _commit_each(ledger, layout, file_name, sha256, slices, run, result, as_handled, progress, t0)
    finally:
        close = getattr(slices, "close", None)
        if close is not None:  # on failure too: a row file is detached now, outside any transaction
            close()


def _commit_each(ledger: Ledger, layout: TopicLayout, file_name: str, sha256: str, slices: Iterable[LoadSlice],
                 run: RunResult, result, as_handled: bool, progress, t0: float) -> None:
    """Each slice in its own transaction (see ``commit_slices``)."""
    for piece in slices:
        result.rows_read += piece.rows_read
        if piece.committed_before:
            continue
        t1 = time.perf_counter()
        now = piece.now
        with gc_paused(), ledger.atomic() as conn:
            top = TopicTable(conn, layout).high_watermark()
            inserted = piece.insert(conn, top) if piece.accepted else 0
            if as_handled and inserted:
                acks.mark_appended_handled_in_current_transaction(conn, layout.name, top, now)
            quarantine_in_current_transaction(conn, (
                Quarantined(layout.name, payload, error, f"{file_name}:{line}", now, run_id=run.run_id)
                for line, error, payload in piece.refused))
            loads.record_progress_in_current_transaction(conn, layout.name, sha256, file_name, piece.last_line,
                                                         run.run_id, now)
            checkpoint("backfill:batch-inserted")  # before its COMMIT
        run.details["commit_seconds"] = round(run.details.get("commit_seconds", 0) + time.perf_counter() - t1,
                                              2)
        checkpoint("backfill:batch-committed")
        run.rows_out += inserted
        run.rows_duplicate += piece.accepted - inserted
        run.rows_quarantined += len(piece.refused)
        run.rows_in += piece.accepted + len(piece.refused)
        if progress:
            progress(f"  {file_name}: line {piece.last_line:,} — loaded {run.rows_out:,}, duplicates "
                     f"{run.rows_duplicate:,}, quarantined {run.rows_quarantined:,} "
                     f"({time.perf_counter() - t0:.1f} s)")


def failed_rows_since(conn: sqlite3.Connection, topic: str, consumer: str, since: str) -> list[tuple[int, str]]:
    """(row id, last error) of the rows of ``topic`` whose transform failed for ``consumer`` since ``since``."""
    return conn.execute(
        "SELECT a.row_id, a.last_error FROM _minikafka_attempts a JOIN _minikafka_consumers c "
        "ON c.id = a.consumer_id WHERE c.topic = ? AND c.name = ? AND a.updated_at >= ? ORDER BY a.row_id",
        (topic, consumer, since),
    ).fetchall()

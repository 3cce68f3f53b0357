"""The run log as a person reads it: quiet runs folded, counts per topic, one column order.

- **Folding.** A night with nothing new still leaves a row per stage (the ledger keeps the
  truth: health and metrics read those rows). A reader folds consecutive *quiet* runs of a
  stage (status succeeded, nothing read, written, skipped, failed or set aside; a kind of run
  that consumes something, :data:`QUIET_KINDS`) into one shown row: the latest of them, with
  ``folded`` = {count, first/last run id and start}. ``limit`` counts shown rows, so twenty
  rows are twenty things that happened. Only the reading folds; nothing stored changes.
- **Cost.** The walk reads the run log newest first along an index (``started_at``, or
  ``(stage, started_at)`` for one stage) and stops at ``limit`` shown rows; a fold cut by
  the limit is completed along its stage's index back to its stage's last busy run. What it
  reads grows with what is shown (and the quiet runs folded into it), not with history.
- **Counts per topic.** A stage's commit records in its details ``rows_by_topic``: per input
  topic the rows read, acked, failed (left pending for a retry) and quarantined; per output
  topic the rows written, skipped as duplicates and quarantined (``rows_by_topic``). A row
  written before that has none: readers show its sums only.
- **Columns.** ``run`` and ``status`` print the same count columns in the same order
  (:data:`TABLE_COLUMNS`, :func:`table_heading`, :func:`table_cells`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .runlog import COLUMNS, decoded, settled

# kinds whose run with zero counts means "nothing was new": each consumes something
QUIET_KINDS = ("stage", "pipeline", "delivery", "stream", "work", "ingest", "nightly")
_QUIET_SQL = ("(status = 'succeeded' AND rows_in = 0 AND rows_out = 0 AND rows_duplicate = 0 AND rows_failed = 0 "
              f"AND rows_quarantined = 0 AND kind IN ({', '.join(repr(k) for k in QUIET_KINDS)}))")
_ORDER = "ORDER BY started_at DESC, rowid DESC"

# (run-log column, heading, width): the count columns of ``run`` and ``status``, in this order
TABLE_COLUMNS = (("stage", "stage", 22), ("status", "status", 10), ("rows_in", "in", 9), ("rows_out", "out", 9),
                 ("rows_duplicate", "dup", 7), ("rows_quarantined", "quar", 6), ("rows_failed", "fail", 6),
                 ("duration_s", "time", 9))


def is_quiet(run: dict[str, Any]) -> bool:
    """The run succeeded with nothing read, written, skipped, failed or set aside (a run of
    :data:`QUIET_KINDS`): a night with nothing new."""
    return (run.get("kind") in QUIET_KINDS and run.get("status") == "succeeded"
            and not any(run.get(k) for k in ("rows_in", "rows_out", "rows_duplicate", "rows_failed",
                                             "rows_quarantined")))


def table_heading() -> str:
    """The headings of :data:`TABLE_COLUMNS` (text left, counts and time right aligned)."""
    return " ".join(f"{head:{width}}" if key in ("stage", "status") else f"{head:>{width}}"
                    for key, head, width in TABLE_COLUMNS)


def table_cells(values: dict[str, Any]) -> str:
    """One line of :data:`TABLE_COLUMNS` from ``values`` (a run row, or a stage's outcome with
    its name as ``stage``, its status and seconds as ``duration_s``)."""
    cells = []
    for key, _head, width in TABLE_COLUMNS:
        value = values.get(key)
        if key == "stage":  # a long name is cut; a status is shown whole ('interrupted' pushes the line)
            cells.append(f"{str(value or '')[:width]:{width}}")
        elif key == "status":
            cells.append(f"{str(value or ''):{width}}")
        elif key == "duration_s":
            cells.append(f"{float(value or 0):>{width - 1}.2f}s")
        else:
            cells.append(f"{int(value or 0):>{width}}")
    return " ".join(cells)


def rows_by_topic(run: dict[str, Any]) -> dict[str, Any] | None:
    """{inputs: {topic: {read, acked, failed, quarantined}}, outputs: {topic: {written,
    duplicate, quarantined}}} of a stage run, or None for a run that did not record them (an
    older minikafka, a run of another kind)."""
    details = run.get("details")
    found = details.get("rows_by_topic") if isinstance(details, dict) else None
    return found if isinstance(found, dict) else None


def describe_by_topic(counts: dict[str, Any]) -> str:
    """``in: a 5, b 2; out: x 3 (1 duplicate, 2 quarantined), y 1`` (parts that are 0 left out)."""
    def topic(name: str, c: dict[str, Any], main: str, extra: tuple[tuple[str, str], ...]) -> str:
        more = [f"{c[k]} {word}" for k, word in extra if c.get(k)]
        return f"{name} {c.get(main, 0)}" + (f" ({', '.join(more)})" if more else "")

    ins = [topic(t, c, "read", (("failed", "failed"), ("quarantined", "quarantined")))
           for t, c in (counts.get("inputs") or {}).items()]
    outs = [topic(t, c, "written", (("duplicate", "duplicate"), ("quarantined", "quarantined")))
            for t, c in (counts.get("outputs") or {}).items()]
    return "; ".join(part for part in (f"in: {', '.join(ins)}" if ins else "",
                                       f"out: {', '.join(outs)}" if outs else "") if part)


def _name_filter(conn: sqlite3.Connection, name: str) -> tuple[str, list[Any]]:
    """The condition selecting the runs of ``name``: a stage's (its index), else a kind's of no stage."""
    if conn.execute("SELECT 1 FROM _minikafka_runs WHERE stage = ? LIMIT 1", (name,)).fetchone():
        return "stage = ?", [name]
    return "stage IS NULL AND kind = ?", [name]


def _filters(conn: sqlite3.Connection, stage: str | None, hide_kinds: tuple[str, ...], since: str | None,
             until: str | None) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if stage:
        condition, values = _name_filter(conn, stage)
        where.append(condition)
        params += values
    elif hide_kinds:
        where.append(f"kind NOT IN ({', '.join('?' for _ in hide_kinds)})")
        params += hide_kinds
    for condition, value in (("started_at >= ?", since), ("started_at < ?", until)):
        if value:
            where.append(condition)
            params.append(value)
    return where, params


class _Fold:
    """Quiet runs of one stage read so far, newest first."""

    def __init__(self, key: tuple[str | None, str], run_id: str, started_at: str, rowid: int):
        self.key, self.count = key, 1
        self.last = self.first = (run_id, started_at, rowid)
        self.closed = False

    def add(self, run_id: str, started_at: str, rowid: int) -> None:
        self.count += 1
        self.first = (run_id, started_at, rowid)

    def as_dict(self) -> dict[str, Any] | None:
        if self.count < 2:
            return None
        return {"count": self.count, "first_run_id": self.first[0], "first_started_at": self.first[1],
                "last_run_id": self.last[0], "last_started_at": self.last[1]}


def folded_runs(conn: sqlite3.Connection, *, stage: str | None = None, hide_kinds: tuple[str, ...] = (),
                since: str | None = None, until: str | None = None, limit: int = 20,
                fold: bool = True) -> list[dict[str, Any]]:
    """The runs a reader is shown, most recent first, as ``read_runs`` gives them plus
    ``folded`` (None, or for a row standing for several quiet runs of its stage: {count,
    first_run_id, first_started_at, last_run_id, last_started_at}); see the module docstring.

    Args:
        stage: only this stage's runs (or, for runs of no stage, this kind's).
        hide_kinds: without ``stage``, runs of these kinds are left out (health checks).
        since, until: ISO 8601 texts compared with ``started_at`` (``since`` inclusive).
        limit: the rows shown (a fold is one).
        fold: False shows every run on its own row.
    """
    where, params = _filters(conn, stage, hide_kinds, since, until)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    shown: list[tuple[str, _Fold | None]] = []
    open_folds: dict[tuple[str | None, str], _Fold] = {}
    cur = conn.execute(f"SELECT rowid, run_id, stage, kind, started_at, {_QUIET_SQL} FROM _minikafka_runs "
                       f"{clause} {_ORDER}", params)
    try:
        for rowid, run_id, run_stage, kind, started_at, quiet in cur:
            key = (run_stage, kind)
            if fold and quiet:
                current = open_folds.get(key)
                if current is not None:
                    current.add(run_id, started_at, rowid)
                    continue
                if len(shown) >= limit:
                    break
                open_folds[key] = current = _Fold(key, run_id, started_at, rowid)
                shown.append((run_id, current))
                continue
            if key in open_folds:
                open_folds.pop(key).closed = True
            if len(shown) >= limit:
                break
            shown.append((run_id, None))
        else:
            for f in open_folds.values():
                f.closed = True  # the walk read every run there is
    finally:
        cur.close()
    for f in open_folds.values():
        if not f.closed:
            _complete(conn, f, since, until)
    rows = []
    for run_id, f in shown:
        values = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM _minikafka_runs WHERE run_id = ?",
                              (run_id,)).fetchone()
        row = settled(decoded(dict(zip(COLUMNS, values))))
        row["folded"] = f.as_dict() if f is not None else None
        rows.append(row)
    return rows


def _complete(conn: sqlite3.Connection, f: _Fold, since: str | None, until: str | None) -> None:
    """Count into ``f`` the quiet runs of its stage older than the last it holds, back to the
    stage's previous run that was not quiet (along the stage's index)."""
    run_stage, kind = f.key
    where = ["stage = ?" if run_stage is not None else "stage IS NULL", "kind = ?", "started_at <= ?"]
    params: list[Any] = [*([run_stage] if run_stage is not None else []), kind, f.first[1]]
    if since:
        where.append("started_at >= ?")
        params.append(since)
    cur = conn.execute(f"SELECT rowid, run_id, started_at, {_QUIET_SQL} FROM _minikafka_runs "
                       f"WHERE {' AND '.join(where)} {_ORDER}", params)
    try:
        for rowid, run_id, started_at, quiet in cur:
            if started_at == f.first[1] and rowid >= f.first[2]:
                continue  # read by the walk already (same start, at or after it in the walk's order)
            if not quiet:
                break
            f.add(run_id, started_at, rowid)
    finally:
        cur.close()

"""What each page of the console shows, read from the ledger in one short read transaction.

Every function here takes an open (read-only) Source, reads inside ``read_snapshot`` and
returns plain values or the ledger's read models (``ledger.consuming.read_models``, which the
CLI's --json prints too): the transaction ends before a page is rendered or sent. Nothing here
writes SQL; the reads are ``minikafka.ledger``'s functions.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

from ..api.source import Source
from ..errors import (
    ConsoleNotFoundError,
    ConsoleRequestError,
    InvalidFilterError,
    InvalidNameError,
    TopicNotFoundError,
)
from ..ledger.consuming import RowFilter, consumers, deliveries, queues, read_models, runlog, runview, schedules
from ..ledger.consuming import quarantine as qstore
from ..ledger.lake import targets_of as lake_targets
from ..ledger.topics import acks, browse, catalog
from ..ledger.transactions import read_snapshot
from ..quality.report import describe
from ..util.redact import redact_url

RUN_STATUSES = runlog.SHOWN_STATUSES
JOB_STATES = ("pending", "processing", "dead")
PAGE_ROWS = 50
DAY_S = 86400
FAILED = ("failed", "partial", "interrupted")
NotFound = ConsoleNotFoundError
BadRequest = ConsoleRequestError


def _ago(seconds: float) -> str:
    """The ledger's text form of the time ``seconds`` ago (for 'in the last day' counts)."""
    from datetime import timedelta

    from ..util.clock import format_timestamp, now

    return format_timestamp(now() - timedelta(seconds=seconds))


# -- the pipeline graph -------------------------------------------------------------------
def pipeline_graphs(conn, defns) -> list[dict]:
    """Each pipeline as ``{name, stages: [{name, inputs, lookups, outputs}]}``: the pipeline files'
    (``defns``), else one graph drawn from the stages the run log knows (their latest run's inputs
    and outputs, and the lookups its details name)."""
    if defns:
        return [{"name": d.name, "stages": [{"name": s.name, "inputs": list(s.inputs), "lookups": list(s.lookups),
                                             "outputs": list(s.outputs)} for s in d.stages]} for d in defns]
    stages = []
    for name in runlog.run_names(conn):
        last = runlog.find_runs(conn, stage=name, limit=1)
        if last and last[0]["kind"] == "stage" and (last[0]["inputs"] or last[0]["outputs"]):
            looked = (last[0].get("details") or {}).get("lookups") or {}
            stages.append({"name": name, "inputs": last[0]["inputs"] or [], "outputs": last[0]["outputs"] or [],
                           "lookups": sorted(looked) if isinstance(looked, dict) else []})
    return [{"name": "pipeline (from the run log)", "stages": stages}] if stages else []


def _lag_by_topic(conn) -> dict[str, int]:
    out: dict[str, int] = {}
    for info in consumers.consumer_info(conn):
        out[info.topic] = max(out.get(info.topic, 0), info.lag)
    return out


def _quality_failures(run: dict) -> list[dict]:
    failed = []
    for suite in (run.get("quality") or {}).get("suites", []):
        for r in suite.get("results", []):
            if not r.get("success"):
                failed.append({"suite": suite.get("suite"), "expectation": r.get("expectation"),
                               "column": r.get("column"), "text": describe(r)})
    return failed


def overview(source: Source, defns=()) -> dict:
    """The overview: each pipeline's graph with the last run per stage and the lag per topic,
    and what needs attention first."""
    conn = source.ledger.conn
    with read_snapshot(conn):
        graphs = pipeline_graphs(conn, defns)
        lag = _lag_by_topic(conn)
        last: dict[str, dict] = {}
        for g in graphs:
            for s in g["stages"]:
                runs = runlog.find_runs(conn, stage=s["name"], limit=1)
                if runs:
                    last[s["name"]] = runs[0]
        # runs still failing: the last run of their stage (or kind) did not succeed
        latest = [runlog.find_runs(conn, stage=name, limit=1) for name in runlog.run_names(conn)]
        failed_runs = [r[0] for r in latest if r and r[0]["status"] in FAILED]
        quarantine = qstore.quarantine_topics_and_origins(conn, _ago(DAY_S))
        dead = []
        for topic, consumer in queues.queue_pairs(conn):
            cid = acks.find_consumer(conn, topic, consumer)
            n = queues.count_dead(conn, cid, topic, consumer) if cid is not None else 0
            if n:
                dead.append({"queue": _queue_label(topic, consumer), "dead": n})
        topics = catalog.topic_names(conn)
        checks = _health(source, defns)
    expectations = [{"stage": name, "run_id": run["run_id"], **f}
                    for name, run in last.items() for f in _quality_failures(run)]
    lagging = [{"topic": t, "lag": n} for t, n in sorted(lag.items()) if n]
    return {"graphs": graphs, "last": last, "lag": lag, "topics": topics, "health": checks,
            "attention": {"failed_runs": sorted(failed_runs, key=lambda r: r["started_at"], reverse=True)[:10],
                          "expectations": expectations, "quarantine": quarantine, "dead": dead,
                          "lagging": lagging},
            "engines": engine_rows(), "engine_timeout": _engine_timeout(defns)}


def engine_rows() -> list[dict]:
    """This user's running warm engines as the overview shows them (``spark.engines.describe``
    with its figures spelled out: memory in MB, idle for, stops in)."""
    import time

    from ..spark.engines import engines_now, human
    from ..util.duration import format_duration

    now = time.time()
    rows = []
    for e in engines_now(now):
        rows.append({**e, "rss": f"{e['rss_bytes'] / (1 << 20):,.0f} MB" if e["rss_bytes"] is not None else "unknown",
                     "idle": human(e["idle_s"]),
                     "stops": "when stopped" if e["stops_in_s"] is None else
                     f"{human(e['stops_in_s'])} (idle timeout {format_duration(e['idle_timeout_s'])})",
                     "served": [f"{p['name']} ({human(now - p['last_used'])} ago)" for p in e["pipelines"]]})
    return rows


def _engine_timeout(defns) -> str | None:
    """The idle timeout an engine the (first) pipeline's ``run`` starts would have."""
    from ..util.duration import format_duration

    for defn in defns or ():
        return format_duration(defn.engine.idle_timeout) if defn.engine.idle_timeout else "0s"
    return None


def _health(source: Source, defns) -> list[dict]:
    """``minikafka health``'s checks (each pipeline's limits, or what the ledger alone tells),
    worst first: ``{name, state, reason}``."""
    from ..pipelines.health import health_checks
    from ..util.checks import STATES

    seen, out = set(), []
    for defn in (defns or [None]):
        for check in health_checks(source.ledger, defn):
            if check.name not in seen:
                seen.add(check.name)
                out.append({"name": check.name, "state": check.state, "reason": check.reason})
    return sorted(out, key=lambda c: -STATES.index(c["state"]))


# -- runs -----------------------------------------------------------------------------------
def _day(text: str | None, what: str) -> str | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.strip()).strftime("%Y-%m-%d")
    except ValueError:
        raise BadRequest(f"{what} is not a date (YYYY-MM-DD): {text!r}") from None


def runs(source: Source, *, stage: str | None, status: str | None, since: str | None, until: str | None,
         limit: int = 100, show_all: bool = False) -> dict:
    """Runs matching the filters, newest first, and the per-stage timeline of the latest ones.

    Without a status filter, consecutive quiet runs of a stage are one row (``folded``:
    ``runview.folded_runs``), unless ``show_all``; ``limit`` counts shown rows."""
    if status and status not in RUN_STATUSES:
        raise BadRequest(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
    since_day, until_day = _day(since, "since"), _day(until, "until")
    conn = source.ledger.conn
    with read_snapshot(conn):
        names = runlog.run_names(conn)
        # 'until' is a whole day: every started_at of that day sorts below "YYYY-MM-DDT99"
        until_text = None if until_day is None else until_day + "T99"
        if status:
            found = [{**r, "folded": None} for r in runlog.find_runs(
                conn, stage=stage or None, status=status, since=since_day, until=until_text, limit=limit)]
        else:
            found = runview.folded_runs(conn, stage=stage or None, since=since_day, until=until_text, limit=limit,
                                        fold=not show_all)
        timeline = {}
        for name in ([stage] if stage else names):
            timeline[name] = list(reversed(runlog.find_runs(conn, stage=name, since=since_day, limit=30)))
    return {"runs": found, "names": names, "statuses": RUN_STATUSES, "timeline": timeline,
            "filters": {"stage": stage or "", "status": status or "", "since": since_day or "",
                        "until": until_day or "", "all": "1" if show_all else ""},
            "folds": sum(1 for r in found if r.get("folded"))}


def run(source: Source, run_id: str) -> dict:
    """One run: its row, its quality results, the topics its quarantined rows went to, and the first
    rows it wrote to each output that is a topic (rows carry the run id that produced them). A run's
    outputs are not all topics: a backup's is a directory, a delivery's an endpoint URL;
    ``output_topics`` names those that are (the page links only them)."""
    conn = source.ledger.conn
    with read_snapshot(conn):
        found = runlog.read_runs(conn, run_id=run_id, limit=1)
        if not found:
            raise NotFound(f"no run {run_id!r} in {source.path}")
        row = found[0]
        qtopics = runlog.quarantine_topics(conn, run_id)
        written, topics = {}, set(catalog.topic_names(conn))
        output_topics = [t for t in row.get("outputs") or [] if t in topics]
        for topic in output_topics:
            layout = source.layout(topic)
            # bounded by the run's time: _run_id has no index, and a scan of a large topic is slow
            lo, hi = browse.ids_created_between(conn, layout, row["started_at"], row["finished_at"])
            where = (f"_run_id={run_id}", f"_id>={lo}", f"_id<={hi}")
            written[topic] = {"where": list(where), "page": read_models.row_page(
                conn, layout, RowFilter(where), limit=20)}
    return {"run": row, "quarantine_topics": qtopics, "written": written, "output_topics": output_topics,
            "by_topic": runview.rows_by_topic(row),
            "input_topics": [t for t in row.get("inputs") or [] if t in topics],
            "suites": (row.get("quality") or {}).get("suites", []), "report": (row.get("quality") or {}).get("report")}


# -- topics ---------------------------------------------------------------------------------
def topic_list(source: Source) -> list[read_models.TopicOverview]:
    """Every topic with its counts, partitions, consumers' positions and quarantined rows."""
    conn = source.ledger.conn
    with read_snapshot(conn):
        return [read_models.topic_overview(conn, source.layout(name)) for name in catalog.topic_names(conn)]


def _layout(source: Source, name: str):
    """The topic's layout; a name no topic has, or can have (a ledger table's own name, ``<x>``): not found."""
    try:
        return source.layout(name)
    except (TopicNotFoundError, InvalidNameError):
        shown = name if len(name) <= 130 else f"{name[:60]}... ({len(name)} characters)"
        raise NotFound(f"no topic {shown!r} in {source.path}") from None


def topic(source: Source, name: str, *, after: int | None, before: int | None, where: list[str],
          consumer: str | None = None, status: str | None = None) -> dict:
    """One topic: counts, partitions, consumers with committed offsets and lag per partition,
    schema, and one page of rows (by id range) matching the field filters (and, with ``consumer``,
    ``status`` 'new' or 'handled' as that consumer sees them)."""
    if status and status not in ("new", "handled"):
        raise BadRequest(f"status must be new or handled, got {status!r}")
    conn = source.ledger.conn
    with read_snapshot(conn):
        layout = _layout(source, name)
        conditions = tuple(w for w in where if w.strip())
        rows = RowFilter(conditions)
        try:
            rows.condition(layout)  # a filter that does not fit the columns is a bad request, first
        except InvalidFilterError as exc:
            raise BadRequest(str(exc)) from None
        if consumer and status:
            cid = acks.find_consumer(conn, name, consumer)
            if cid is None:
                raise NotFound(f"topic {name!r} has no consumer {consumer!r}")
            rows = RowFilter(conditions, status, cid)
        page = read_models.row_page(conn, layout, rows, after=after, before=before, limit=PAGE_ROWS)
        counts = read_models.topic_overview(conn, layout)
        groups = counts.groups
        columns = [{k: c.describe().get(k) for k in ("name", "kind", "sql_type", "nullable", "enum_values")}
                   for c in layout.columns]
        info = {"model": catalog.stored_model_path(conn, name), "dedup": list(layout.dedup),
                "created_at": catalog.created_at(conn, name)}
        quarantined = qstore.count_quarantined(conn, name)
        lake = [{"name": t.name, "format": t.format, "location": redact_url(t.location), "last_id": t.last_id,
                 "snapshot_id": t.snapshot_id, "updated_at": t.updated_at} for t in lake_targets(conn, [name])]
    return {"topic": name, "counts": counts, "partitions": layout.partitions, "groups": groups, "columns": columns,
            "info": info, "fields": layout.field_names, "page": page, "where": where, "quarantined": quarantined,
            "chosen": {"consumer": consumer or "", "status": status or ""}, "lake": lake}


# -- quarantine and dead letter ----------------------------------------------------------------
ORIGINS = ("stage", "quality", "queue", "delivery")


def quarantine(source: Source, *, topic: str | None, origin: str | None, reason: str | None,
               below: int | None) -> dict:
    """Quarantined rows, newest first, filtered by topic, origin and reason, one page at a time."""
    conn = source.ledger.conn
    with read_snapshot(conn):
        if topic:
            _layout(source, topic)
        rows = qstore.list_quarantined(conn, topic or None, limit=PAGE_ROWS + 1, origin=origin or None,
                                       reason=reason or None, below=below)
        summary = qstore.quarantine_topics_and_origins(conn, _ago(DAY_S))
        topics = catalog.topic_names(conn)
    more = len(rows) > PAGE_ROWS
    return {"rows": rows[:PAGE_ROWS], "more": more, "summary": summary, "topics": topics, "origins": ORIGINS,
            "filters": {"topic": topic or "", "origin": origin or "", "reason": reason or ""}}


def quarantined_row(source: Source, quarantine_id: int) -> dict:
    """One quarantined row with its payload pretty-printed."""
    conn = source.ledger.conn
    with read_snapshot(conn):
        row = qstore.get_quarantined(conn, quarantine_id)
    if row is None:
        raise NotFound(f"no quarantined row {quarantine_id} in {source.path}")
    try:
        pretty = json.dumps(json.loads(row["payload"] or ""), indent=2, ensure_ascii=False)
    except ValueError:
        pretty = row["payload"] or ""
    return {"row": row, "payload": pretty}


# -- queues, schedules, groups -------------------------------------------------------------------
def _queue_label(topic: str, consumer: str) -> str:
    from ..api.modes.queues import queue_label

    return queue_label(topic, consumer)


def _ms_text(ms: int | None) -> str | None:
    from ..util.clock import format_timestamp

    return None if ms is None else format_timestamp(datetime.fromtimestamp(ms / 1000, timezone.utc))


def queue_list(source: Source, state: str | None = None) -> dict:
    """Every work queue: its jobs by state (pending, processing, dead: ``state`` only) with attempts and
    last error, and its finished jobs still kept with their outcome and result."""
    if state and state not in JOB_STATES:
        raise BadRequest(f"state must be one of {', '.join(JOB_STATES)}, got {state!r}")
    conn = source.ledger.conn
    now = int(time.time() * 1000)
    out = []
    with read_snapshot(conn):
        for topic, consumer in queues.queue_pairs(conn):
            cid = acks.find_consumer(conn, topic, consumer)
            if cid is None:
                continue
            counts = queues.state_counts(conn, cid, now)
            jobs = [{"id": j.id, "state": j.state, "attempts": j.attempts, "run_at": _ms_text(j.run_at),
                     "last_error": j.last_error, "worker": j.worker, "priority": j.priority}
                    for j in read_models.queue_jobs(conn, cid, now, state=state or None)]
            finished = [{"id": row_id, "outcome": outcome, "result": result, "finished_at": _ms_text(at)}
                        for row_id, outcome, result, at in queues.list_outcomes(conn, cid, limit=20)]
            lag = read_models.consumer_positions(conn, topic, consumer, cid).lag
            out.append({"name": _queue_label(topic, consumer), "topic": topic, "consumer": consumer,
                        "counts": counts, "not_started": lag - sum(counts.values()), "jobs": jobs,
                        "finished": finished})
    return {"queues": out, "states": JOB_STATES, "state": state or ""}


def schedule_list(source: Source) -> list[dict]:
    """Every schedule with its queue, period, next due time and whether it is paused."""
    conn = source.ledger.conn
    with read_snapshot(conn):
        rows = schedules.all_schedules(conn)
    return [{**r, "next_due_at": _ms_text(r["next_due"]), "last_fired_at": _ms_text(r["last_fired"]),
             "queue": _queue_label(r["topic"], r["consumer"]),
             "period": r["cron"] or (f"every {r['every_ms'] / 1000:g} s" if r["every_ms"] else "")} for r in rows]


def group_list(source: Source) -> dict:
    """Every consumer (stage consumers and consumer groups) with its committed offset and lag per partition,
    and the HTTP delivery batches in flight (their last error, their worker's lease)."""
    conn = source.ledger.conn
    out = []
    with read_snapshot(conn):
        inflight = deliveries.list_inflight(conn)
        for info in consumers.consumer_info(conn, with_lag=False):
            positions = read_models.consumer_positions(conn, info.topic, info.name,
                                                       acks.find_consumer(conn, info.topic, info.name))
            info.lag = positions.lag
            out.append({**info.as_dict(), "partitions": positions.partitions})
    return {"groups": out, "inflight": inflight}


def console_runs(source: Source, limit: int = 20) -> list[dict[str, Any]]:
    """The latest actions taken from the console (their run log rows)."""
    conn = source.ledger.conn
    with read_snapshot(conn):
        return runlog.find_runs(conn, stage="console", limit=limit)

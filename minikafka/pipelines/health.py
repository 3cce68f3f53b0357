"""Health and freshness: the limits of a pipeline file checked against its ledger.

``health_checks(ledger, pipeline)`` returns one ``CheckResult`` per check, in a stable order:

- every stage (of the pipeline, or every stage in the run log without one): its latest
  run (``fail`` when it failed or was interrupted, a 'running' run whose process is gone
  included; ``warn`` when partial, never run, or running on another host that cannot be
  checked); ``freshness`` (a successful run within, and no row of its inputs pending for
  it longer: ``pending``), ``max_lag`` (rows pending for it on its inputs),
  ``max_quarantined_per_run`` (rows its latest run quarantined);
- every topic with limits: ``freshness`` (a row appended within), ``max_lag`` (rows
  pending for any one consumer), ``max_quarantined`` (rows in its quarantine);
- every queue: ``max_dead`` and ``max_pending_age`` from ``[queues."topic:consumer"]``;
  a queue without limits warns when its dead letter holds jobs;
- ``[health] backups``: the newest snapshot within ``backup_freshness`` (the snapshots of
  this ledger, by its identity);
- ``ledger integrity`` (``check_health`` only): ``PRAGMA quick_check``, read before the
  ledger is opened for writing. A file that is not a ledger (empty, text, damaged first
  page) or fails the check is one failing check and nothing else: nothing reads its
  tables, nothing is written into it (no run row), and notify URLs hear about it on every
  run while it lasts.

``check_health(...)`` runs them as a run of its own: the states go into a run-log row
(kind ``health``), and with ``notify`` URLs a message is sent when a check's state
differs from what the last delivered notification said (not on every check).

A check's reason may quote a failed run's error: it is masked, then cut
(``util.redact.redact_and_cut``), and ``CheckResult`` masks every reason it is given, so
the printed lines, ``--json``, the run row and the notification never show a secret.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidSettingError, LedgerNotFoundError
from ..ledger.consuming import RunResult, new_run_id, vitals
from ..ledger.files import record_run, snapshots
from ..ledger.transactions import Ledger, filecheck
from ..util import clock
from ..util.checks import FAIL, OK, WARN, CheckResult, human_age, worst
from ..util.duration import format_duration
from ..util.redact import redact_and_cut, redact_secrets, redact_url, redact_value
from ..util.results import Result
from .definition import PipelineDefinition

if TYPE_CHECKING:
    from ..connectors.notify import NotifyOutcome

BAD_STATUSES = ("failed", "interrupted")


def _age_s(text: str | None, now: datetime) -> float | None:
    if text is None:
        return None
    return max(0.0, (now - clock.parse_timestamp(text)).total_seconds())


def _pending_counter(conn):
    """``pending(topic, consumer)``, each pair counted once per health run (a stage's lag and its
    topic's lag ask for the same count)."""
    cache: dict[tuple, int | None] = {}

    def pending(topic: str, consumer: str, partitions: list[int] | None = None) -> int | None:
        key = (topic, consumer, tuple(partitions) if partitions is not None else None)
        if key not in cache:
            cache[key] = vitals.pending_for(conn, topic, consumer, partitions)
        return cache[key]

    return pending


def _stage_checks(conn, name: str, now: datetime, stage=None, pending=None) -> list[CheckResult]:
    out = []
    last = vitals.latest_run(conn, name)
    subject = f"stage {name}"
    if last is None:
        out.append(CheckResult(f"{subject} last run", WARN, "never ran", {"runs": 0}))
    else:
        status = last["status"]
        # 'unknown': running on another host, whose process nothing here can check (runlog.settled)
        state = FAIL if status in BAD_STATUSES else WARN if status in ("partial", "unknown") else OK
        reason = f"{status} ({last['run_id']}, {human_age(_age_s(last['started_at'], now))} ago)"
        if last.get("error") and state != OK:
            reason += f": {redact_and_cut(last['error'], 200, first_line=True)}"  # masked, then cut
        out.append(CheckResult(f"{subject} last run", state, reason,
                               {"run_id": last["run_id"], "status": status,
                                "age_s": _age_s(last["started_at"], now)}))
    if stage is None:
        return out
    if stage.freshness is not None:
        success = vitals.latest_success(conn, name)
        age = _age_s(success[1], now) if success else None
        out.append(_freshness(subject, age, stage.freshness, "no successful run yet", "last success {} ago"))
    if stage.freshness is not None:  # rows waiting longer than the stage may go without a run: no max_lag needed
        out.append(_pending_age(conn, subject, stage, now))
    if stage.max_lag is not None:
        counts = {t: pending(t, stage.consumer, stage.topic_partitions) for t in stage.inputs}
        known = {t: n for t, n in counts.items() if n is not None}
        if not known:
            out.append(CheckResult(f"{subject} lag", WARN, "its consumer is not registered yet (no run so far)",
                                   {"pending": None, "limit": stage.max_lag}))
        else:
            total = sum(known.values())
            out.append(CheckResult(f"{subject} lag", OK if total <= stage.max_lag else FAIL,
                                   f"{total} row(s) pending (limit {stage.max_lag})",
                                   {"pending": total, "limit": stage.max_lag, "by_topic": known}))
    if stage.max_quarantined_per_run is not None:
        n = int(last["rows_quarantined"] or 0) if last else 0
        limit = stage.max_quarantined_per_run
        out.append(CheckResult(f"{subject} quarantined per run", OK if n <= limit else FAIL,
                               f"its latest run quarantined {n} row(s) (limit {limit})",
                               {"quarantined": n, "limit": limit}))
    return out


def _pending_age(conn, subject: str, stage, now: datetime) -> CheckResult:
    """Fail when a row of the stage's inputs has been pending for it longer than its freshness
    (a night whose run died leaves the night's rows pending: this says so without a max_lag)."""
    oldest = {t: vitals.oldest_pending_time(conn, t, stage.consumer, stage.topic_partitions) for t in stage.inputs}
    ages = {t: _age_s(when, now) for t, when in oldest.items() if when is not None}
    limit = stage.freshness
    if not ages:
        return CheckResult(f"{subject} pending", OK, "no rows pending", {"oldest_age_s": None, "limit_s": limit})
    topic, age = max(ages.items(), key=lambda kv: kv[1])
    return CheckResult(f"{subject} pending", OK if age <= limit else FAIL,
                       f"oldest pending row of {topic} appended {human_age(age)} ago (limit {format_duration(limit)})",
                       {"oldest_age_s": age, "limit_s": limit, "topic": topic})


def _freshness(subject: str, age: float | None, limit: float, none_yet: str, seen: str) -> CheckResult:
    """The freshness check of ``subject``: fail when nothing is there yet or ``age`` exceeds ``limit``;
    ``seen`` is the reason's text with ``{}`` where the age goes."""
    ok = age is not None and age <= limit
    reason = (f"{none_yet} (limit {format_duration(limit)})" if age is None else
              f"{seen.format(human_age(age))} (limit {format_duration(limit)})")
    return CheckResult(f"{subject} freshness", OK if ok else FAIL, reason, {"age_s": age, "limit_s": limit})


def _topic_checks(conn, topic, now: datetime, pending) -> list[CheckResult]:
    out = []
    subject = f"topic {topic.name}"
    if topic.freshness is not None:
        age = _age_s(vitals.newest_row_time(conn, topic.name), now)
        out.append(_freshness(subject, age, topic.freshness, "no rows yet", "newest row {} old"))
    if topic.max_lag is not None:
        lags = {c: pending(topic.name, c) for c in vitals.consumers_of(conn, topic.name)}
        lags = {c: n for c, n in lags.items() if n is not None}
        if not lags:
            out.append(CheckResult(f"{subject} lag", OK, "no consumers yet", {"pending": 0, "limit": topic.max_lag}))
        else:
            consumer, most = max(lags.items(), key=lambda kv: kv[1])
            out.append(CheckResult(f"{subject} lag", OK if most <= topic.max_lag else FAIL,
                                   f"{most} row(s) pending for {consumer} (limit {topic.max_lag})",
                                   {"pending": most, "consumer": consumer, "limit": topic.max_lag,
                                    "by_consumer": lags}))
    if topic.max_quarantined is not None:
        n = vitals.quarantined(conn, topic.name)
        out.append(CheckResult(f"{subject} quarantined", OK if n <= topic.max_quarantined else FAIL,
                               f"{n} row(s) in its quarantine (limit {topic.max_quarantined})",
                               {"quarantined": n, "limit": topic.max_quarantined}))
    return out


def _queue_checks(conn, label: str, topic: str, consumer: str, rules, now: datetime) -> list[CheckResult]:
    figures = vitals.queue_figures(conn, topic, consumer)
    subject = f"queue {label}"
    if figures is None:
        return [CheckResult(f"{subject} dead", WARN, "no such queue in the ledger yet", {"dead": None})]
    out = []
    dead = figures["dead"]
    if rules is None or rules.max_dead is None:
        if rules is None or dead:
            out.append(CheckResult(f"{subject} dead", WARN if dead else OK,
                                   f"{dead} job(s) in the dead letter (no max_dead set)", {"dead": dead}))
    else:
        out.append(CheckResult(f"{subject} dead", OK if dead <= rules.max_dead else FAIL,
                               f"{dead} job(s) in the dead letter (limit {rules.max_dead})",
                               {"dead": dead, "limit": rules.max_dead}))
    if rules is not None and rules.max_pending_age is not None:
        age = _age_s(figures["oldest_pending_at"], now)
        limit = rules.max_pending_age
        reason = (f"nothing waiting (limit {format_duration(limit)})" if age is None else
                  f"oldest waiting job {human_age(age)} old (limit {format_duration(limit)})")
        out.append(CheckResult(f"{subject} pending age", OK if age is None or age <= limit else FAIL, reason,
                               {"age_s": age, "limit_s": limit}))
    return out


def _backup_check(ledger: Path, settings, now: datetime) -> list[CheckResult]:
    if settings.backups is None:
        return []
    newest = snapshots.list_snapshots(settings.backups, ledger)
    limit = settings.backup_freshness
    if not newest:
        return [CheckResult("backups freshness", FAIL, f"no snapshot in {settings.backups}",
                            {"age_s": None, "limit_s": limit})]
    age = max(0.0, (now - newest[0].taken_at).total_seconds())
    if limit is None:
        return [CheckResult("backups freshness", OK, f"newest snapshot {human_age(age)} old (no backup_freshness set)",
                            {"age_s": age, "limit_s": None})]
    return [CheckResult("backups freshness", OK if age <= limit else FAIL,
                        f"newest snapshot {human_age(age)} old (limit {format_duration(limit)})",
                        {"age_s": age, "limit_s": limit})]


def health_checks(ledger: Ledger, pipeline: PipelineDefinition | None = None, *,
                  now: datetime | None = None) -> list[CheckResult]:
    """Every check of the ledger (and the pipeline's limits), without writing anything.

    Args:
        ledger: an open ledger (read-only is enough).
        pipeline: the pipeline file whose limits apply; None checks what the ledger alone
            tells (every stage's latest run, every queue's dead letter).
        now: the time to measure ages against (default: the clock's now).
    """
    now = now or clock.now()
    conn = ledger.conn
    checks: list[CheckResult] = []
    stages = {s.name: s for s in pipeline.stages} if pipeline else {}
    names = list(stages) + [n for n in vitals.stages_in_runlog(conn) if n not in stages and pipeline is None]
    pending = _pending_counter(conn)
    for name in names:
        checks.extend(_stage_checks(conn, name, now, stages.get(name), pending))
    if pipeline:
        for topic in pipeline.topics.values():
            checks.extend(_topic_checks(conn, topic, now, pending))
    rules = pipeline.queues if pipeline else {}
    pairs = {(r.topic, r.consumer): label for label, r in rules.items()}
    for topic, consumer in vitals.queue_pairs(conn):
        pairs.setdefault((topic, consumer), topic if topic == consumer else f"{topic}:{consumer}")
    for (topic, consumer), label in sorted(pairs.items(), key=lambda kv: kv[1]):
        checks.extend(_queue_checks(conn, label, topic, consumer, rules.get(label), now))
    if pipeline:
        checks.extend(_backup_check(Path(ledger.path).resolve(), pipeline.health, now))
    return checks


@dataclass
class HealthResult(Result):
    """What one health run found (and whom it told)."""

    run_id: str
    state: str
    checks: list[CheckResult]
    changed: list[dict[str, Any]] = field(default_factory=list)
    notified: list[NotifyOutcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.state != FAIL

    def summary(self) -> str:
        counts = {s: sum(1 for c in self.checks if c.state == s) for s in (OK, WARN, FAIL)}
        text = (f"health {self.state}: {len(self.checks)} check(s), {counts[OK]} ok, {counts[WARN]} warn, "
                f"{counts[FAIL]} fail ({self.run_id}, {self.seconds:.2f} s)")
        return "\n".join([text, *(n.describe() for n in self.notified)])

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "state": self.state, "ok": self.ok,
                "checks": [c.as_dict() for c in self.checks], "changed": self.changed,
                "notified": [{"url": n.url, "delivered": n.delivered, "attempts": n.attempts, "error": n.error}
                             for n in self.notified], "seconds": self.seconds}


def _message(scope: str, state: str, checks: list[CheckResult], changed: list[dict[str, Any]]) -> tuple[dict, str]:
    bad = [c for c in checks if c.state != OK]
    headline = f"minikafka health {scope}: {state.upper()}"
    if bad:
        headline += " - " + "; ".join(f"{c.name}: {c.reason}" for c in bad[:5])
        if len(bad) > 5:
            headline += f"; and {len(bad) - 5} more"
    else:
        headline += " - every check ok"
    document = {"scope": scope, "state": state, "text": headline, "changed": changed,
                "checks": [c.as_dict() for c in checks]}
    return redact_value(document), redact_secrets(headline)


def check_health(ledger_path: str | Path, pipeline: PipelineDefinition | None = None, *,
                 notify_urls: tuple[str, ...] = (), notify_format: str = "json",
                 notify_headers: Mapping[str, str] | None = None, attempts: int = 4,
                 sleep: Callable[[float], None] = time.sleep, now: datetime | None = None) -> HealthResult:
    """Run every check, log the run, and notify the URLs when a state changed.

    Args:
        ledger_path: the ledger (opened for writing: the run leaves a row in its run log).
        pipeline: the pipeline whose limits apply (None: what the ledger alone tells).
        notify_urls: webhooks told when any check's state differs from the last delivered
            notification (the first run compares with "every check ok").
        notify_format: ``json`` (a document) or ``text`` (one line, for ntfy-style receivers).
        notify_headers: sent with every notification (an auth token); only their names reach
            the run log, their values nothing (see ``connectors.notify.parse_notify_headers``).
        attempts: requests per URL at most (retried with backoff on timeouts and 5xx).

    Raises:
        ValueError: a notify URL is not http(s), an unknown format, a header HTTP cannot carry, or
            headers without a URL (nothing checked or sent).
        LedgerNotFoundError: no ledger at ``ledger_path``.
    """
    t0 = time.perf_counter()
    headers = dict(notify_headers or {})
    if notify_urls or headers or notify_format != "json":  # the HTTP client is imported only to notify
        from ..connectors import notify as notifier

        if notify_format not in notifier.FORMATS:
            raise ValueError(f"notify format must be one of {notifier.FORMATS}, got {notify_format!r}")
        for url in notify_urls:
            notifier.check_notify_url(url)
        for name, value in headers.items():
            notifier.check_header(name, value)
    if headers and not notify_urls:
        raise InvalidSettingError(f"notify headers ({', '.join(sorted(headers))}) need a notify URL to go to")
    scope = pipeline.name if pipeline else str(Path(ledger_path).resolve())
    if not Path(ledger_path).expanduser().is_file():
        raise LedgerNotFoundError(f"no ledger at {ledger_path}", path=str(ledger_path))
    sound = _ledger_file_check(Path(ledger_path).expanduser())
    if sound.state == FAIL:
        return _damaged(sound, scope, notify_urls, notify_format, headers, attempts, sleep, t0)
    led = Ledger(str(ledger_path), create=False)
    try:
        run = RunResult(new_run_id("health"), "health", stage="health")
        checks = health_checks(led, pipeline, now=now) + [sound]
        state = worst(checks)
        states = {c.name: c.state for c in checks}
        changed: list[dict[str, Any]] = []
        outcomes: list[NotifyOutcome] = []
        if notify_urls:
            before = vitals.last_notified_states(led.conn, scope) or {}
            for c in checks:
                was = before.get(c.name, OK)
                if was != c.state:
                    changed.append({"name": c.name, "from": was, "to": c.state, "reason": c.reason})
            for name, was in before.items():
                if name not in states and was != OK:
                    changed.append({"name": name, "from": was, "to": "gone", "reason": "no longer checked"})
            if changed:
                document, text = _message(scope, state, checks, changed)
                outcomes = [notifier.notify(url, document, text, fmt=notify_format, attempts=attempts,
                                            headers=headers, sleep=sleep)
                            for url in notify_urls]
        delivered = all(o.delivered for o in outcomes)
        run.details = {"scope": scope, "state": state, "states": states, "checks": len(checks),
                       "failing": [c.line() for c in checks if c.state != OK][:50],
                       "notified": delivered if notify_urls else None,
                       "notify": [{"url": o.url, "delivered": o.delivered, "attempts": o.attempts,
                                   "error": o.error} for o in outcomes],
                       "urls": [redact_url(u) for u in notify_urls], "headers": sorted(headers)}
        run.finish("succeeded")  # the checking worked; what it found is in details.state
    finally:
        led.close()
    record_run(ledger_path, run)
    return HealthResult(run.run_id, state, checks, changed, outcomes, round(time.perf_counter() - t0, 3))


def _ledger_file_check(path: Path) -> CheckResult:
    """``ledger`` (not a ledger file) or ``ledger integrity`` (``PRAGMA quick_check``), read-only."""
    problem = filecheck.ledger_file_problem(path)
    if problem:
        return CheckResult("ledger", FAIL, f"{problem}; {filecheck.damage_advice(path)}", {"path": str(path)})
    problems = filecheck.quick_check_problems(path)
    if problems:
        return CheckResult("ledger integrity", FAIL, f"PRAGMA quick_check: {'; '.join(problems[:3])}; "
                           f"{filecheck.damage_advice(path)}", {"problems": problems})
    return CheckResult("ledger integrity", OK, "PRAGMA quick_check ok", {"problems": []})


def _damaged(check: CheckResult, scope: str, notify_urls: tuple[str, ...], notify_format: str,
             headers: Mapping[str, str], attempts: int, sleep: Callable[[float], None], t0: float) -> HealthResult:
    """The health of a file that is not a sound ledger: that one failing check, told to every
    notify URL (no earlier state can be read from it, and no run row written into it)."""
    changed = [{"name": check.name, "from": "unknown", "to": check.state, "reason": check.reason}]
    outcomes: list[NotifyOutcome] = []
    if notify_urls:
        from ..connectors import notify as notifier

        document, text = _message(scope, FAIL, [check], changed)
        outcomes = [notifier.notify(url, document, text, fmt=notify_format, attempts=attempts, headers=dict(headers),
                                    sleep=sleep) for url in notify_urls]
    return HealthResult(new_run_id("health"), FAIL, [check], changed if notify_urls else [], outcomes,
                        round(time.perf_counter() - t0, 3))

"""Health checks: the pipeline file's limits against what the ledger holds, at a given time."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from minikafka import PipelineDefinitionError, Source
from minikafka.ledger.consuming import (
    Quarantined,
    RunResult,
    quarantine_in_current_transaction,
    write_run_in_current_transaction,
)
from minikafka.ledger.transactions import Ledger
from minikafka.pipelines.definition import load_pipeline
from minikafka.pipelines.health import check_health, health_checks
from minikafka.util.clock import ManualClock, format_timestamp, use_clock
from schemas.homelab import RssItem

T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)

PIPELINE = """
[pipeline]
name = "night"
source = "ledger.sqlite"

[health]
backups = "backups"
backup_freshness = "2d"

[topics."rss.items"]
model = "schemas.homelab:RssItem"
dedup = ["url"]
freshness = "26h"
max_lag = 3
max_quarantined = 2

[topics."rss.articles"]
model = "schemas.homelab:RssItem"
dedup = ["url"]

[queues."rss.articles:fetch"]
max_dead = 0
max_pending_age = "1h"

[[stages]]
name = "keep_articles"
job = "jobs.keep_articles"
inputs = ["rss.items"]
outputs = ["rss.articles"]
freshness = "26h"
max_lag = 5
max_quarantined_per_run = 1
"""


def _item(i: int) -> dict:
    return {"url": f"https://example.com/{i}", "feed": "f", "title": f"item {i}", "body": "b",
            "published": "2030-01-01T00:00:00Z"}


@pytest.fixture
def pipeline(tmp_path):
    path = tmp_path / "night.toml"
    path.write_text(PIPELINE)
    return load_pipeline(path)


def _run(ledger: str, stage: str, status: str, started: datetime, **counts) -> None:
    run = RunResult(f"{stage}-{started:%H%M%S}-{status}", "stage", stage=stage, status=status,
                    started_at=format_timestamp(started), finished_at=format_timestamp(started + timedelta(minutes=1)),
                    **counts)
    led = Ledger(ledger)
    with led.atomic() as conn:
        write_run_in_current_transaction(conn, run)
    led.close()


def _states(checks) -> dict[str, str]:
    return {c.name: c.state for c in checks}


def _checks(pipeline, now):
    led = Ledger(str(pipeline.source), read_only=True)
    try:
        return health_checks(led, pipeline, now=now)
    finally:
        led.close()


def test_a_stage_that_never_ran_and_an_empty_topic_are_reported_with_their_limits(pipeline):
    Source(str(pipeline.source)).close()
    checks = _checks(pipeline, T0)
    states = _states(checks)
    assert states["stage keep_articles last run"] == "warn"
    assert states["stage keep_articles freshness"] == "fail"
    assert states["topic rss.items freshness"] == "fail"
    assert states["backups freshness"] == "fail"
    reasons = {c.name: c.reason for c in checks}
    assert reasons["stage keep_articles freshness"] == "no successful run yet (limit 26h)"


def test_freshness_passes_within_the_limit_and_fails_past_it(pipeline):
    ledger = str(pipeline.source)
    with use_clock(ManualClock(T0)), Source(ledger) as source:
        source.topic("rss.items", RssItem, dedup=("url",)).append(_item(1))
    _run(ledger, "keep_articles", "succeeded", T0)
    fresh = _checks(pipeline, T0 + timedelta(hours=25))
    assert _states(fresh)["stage keep_articles freshness"] == "ok"
    assert _states(fresh)["topic rss.items freshness"] == "ok"
    stale = {c.name: c for c in _checks(pipeline, T0 + timedelta(hours=27))}
    assert stale["stage keep_articles freshness"].state == "fail"
    assert stale["stage keep_articles freshness"].numbers["limit_s"] == 26 * 3600
    assert stale["topic rss.items freshness"].reason == "newest row 27.0h old (limit 26h)"


def test_a_failed_latest_run_fails_even_when_an_older_one_succeeded(pipeline):
    ledger = str(pipeline.source)
    Source(ledger).close()
    _run(ledger, "keep_articles", "succeeded", T0)
    _run(ledger, "keep_articles", "failed", T0 + timedelta(hours=1), rows_quarantined=4)
    checks = {c.name: c for c in _checks(pipeline, T0 + timedelta(hours=2))}
    assert checks["stage keep_articles last run"].state == "fail"
    assert checks["stage keep_articles freshness"].state == "ok"
    assert checks["stage keep_articles quarantined per run"].state == "fail"
    assert checks["stage keep_articles quarantined per run"].numbers == {"quarantined": 4, "limit": 1}


def test_lag_counts_the_rows_pending_for_the_stage_and_for_each_consumer(pipeline):
    ledger = str(pipeline.source)
    with Source(ledger) as source:
        items = source.topic("rss.items", RssItem, dedup=("url",))
        items.consumer("keep_articles")
        items.extend([_item(i) for i in range(8)])
        for record in list(items.iter_new(consumer="keep_articles", records=True))[:2]:
            record.ack()
    checks = {c.name: c for c in _checks(pipeline, T0)}
    assert checks["stage keep_articles lag"].numbers["pending"] == 6
    assert checks["stage keep_articles lag"].state == "fail"
    assert checks["topic rss.items lag"].state == "fail"
    assert checks["topic rss.items lag"].numbers["limit"] == 3


def test_quarantine_and_queue_limits(pipeline):
    ledger = str(pipeline.source)
    with use_clock(ManualClock(T0)), Source(ledger) as source:
        articles = source.topic("rss.articles", RssItem, dedup=("url",))
        queue = articles.queue("fetch", max_attempts=1)
        articles.extend([_item(i) for i in range(3)])
        job = queue.claim_one("w1")
        job.fail("boom")
        with source.ledger.atomic() as conn:
            quarantine_in_current_transaction(conn, [Quarantined("rss.items", "{}", "bad", "test",
                                                                 format_timestamp(T0)) for _ in range(3)])
    checks = {c.name: c for c in _checks(pipeline, T0 + timedelta(hours=2))}
    assert checks["topic rss.items quarantined"].state == "fail"
    assert checks["topic rss.items quarantined"].numbers == {"quarantined": 3, "limit": 2}
    assert checks["queue rss.articles:fetch dead"].state == "fail"
    assert checks["queue rss.articles:fetch dead"].numbers["dead"] == 1
    assert checks["queue rss.articles:fetch pending age"].state == "fail"
    assert checks["queue rss.articles:fetch pending age"].reason == "oldest waiting job 2.0h old (limit 1h)"


def test_without_a_pipeline_every_stage_in_the_run_log_and_every_queue_is_checked(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    with Source(ledger) as source:
        source.topic("jobs", RssItem, dedup=None).queue("jobs")
    _run(ledger, "nightly", "partial", T0)
    led = Ledger(ledger, read_only=True)
    checks = health_checks(led, None, now=T0)
    led.close()
    assert _states(checks) == {"stage nightly last run": "warn", "queue jobs dead": "ok"}


def test_a_health_run_leaves_a_row_in_the_run_log(pipeline):
    Source(str(pipeline.source)).close()
    result = check_health(pipeline.source, pipeline, now=T0)
    assert result.state == "fail" and not result.ok
    led = Ledger(str(pipeline.source), read_only=True)
    kind, details = led.conn.execute("SELECT kind, details FROM _minikafka_runs WHERE run_id = ?",
                                     (result.run_id,)).fetchone()
    led.close()
    assert kind == "health"
    assert json.loads(details)["states"]["stage keep_articles freshness"] == "fail"


@pytest.mark.parametrize(("old", "new", "message"), [
    ('freshness = "26h"\nmax_lag = 5', 'freshness = "a day"\nmax_lag = 5',
     r"stages.keep_articles.freshness: freshness must be a positive duration"),
    ("max_lag = 5", "max_lag = -1", r"stages.keep_articles.max_lag: must be an integer >= 0"),
    ("max_lag = 5", 'max_lag = "5"', r"stages.keep_articles.max_lag: expected an integer"),
    ("max_quarantined_per_run = 1", "max_quarantined = 1",
     r"unknown key 'max_quarantined' \(did you mean 'max_quarantined_per_run'\?\)"),
    ('max_pending_age = "1h"', 'max_pending_age = "1 hour"', r'queues."rss.articles:fetch".max_pending_age'),
])
def test_a_bad_health_limit_is_named_with_its_key(tmp_path, old, new, message):
    path = tmp_path / "night.toml"
    assert old in PIPELINE
    path.write_text(PIPELINE.replace(old, new))
    with pytest.raises(PipelineDefinitionError, match=message):
        load_pipeline(path)


def test_a_queue_limit_needs_a_queue_name_of_topic_and_consumer(tmp_path):
    path = tmp_path / "night.toml"
    path.write_text(PIPELINE.replace('[queues."rss.articles:fetch"]', '[queues."rss articles:fetch"]'))
    with pytest.raises(PipelineDefinitionError, match=r"queues.\"rss articles:fetch\": a queue is named"):
        load_pipeline(path)


def test_health_stays_fast_on_a_relative_path_ledger(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Source("l.sqlite").close()
    assert check_health(Path("l.sqlite")).state == "ok"

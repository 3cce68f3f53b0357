"""Running pipelines: DAG order, idempotence, strategies, stage selection (in one Spark app)."""

from __future__ import annotations

import pytest

from minikafka import Source
from minikafka.connectors.ingest import ingest_jsonl
from minikafka.pipelines import load_pipeline
from minikafka.pipelines.opening import open_source
from minikafka.pipelines.runner import run_pipeline
from schemas.homelab import Scored
from tests.pipelines.helpers import generate, homelab_copy

pytestmark = pytest.mark.spark


def ingest(defn, path):
    with open_source(defn) as src:
        return ingest_jsonl(src._topics["rss.items"], path)


def scored(defn) -> dict:
    with Source(str(defn.source)) as src:
        return {s.url: s.score for s in src.topic("rss.scored", Scored, dedup=("url",)).iter_new()}


def test_full_run_then_nothing_then_only_the_new_items(spark, tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path))
    first = ingest(defn, generate(tmp_path, 300))
    assert first.quarantined > 0 and first.duplicates > 0
    result = run_pipeline(defn, in_process=True, echo=lambda m: None)
    assert result.ok, result.table()
    out = {o.name: o.run for o in result.outcomes}
    assert out["split_youtube"]["rows_out"] + out["keep_articles"]["rows_out"] == first.appended
    assert out["score"]["rows_out"] == first.appended == len(scored(defn))

    again = run_pipeline(defn, in_process=True, echo=lambda m: None)
    assert all(o.run["rows_in"] == 0 for o in again.outcomes)

    more = ingest(defn, generate(tmp_path, 50, start=10_000))
    third = run_pipeline(defn, in_process=True, echo=lambda m: None)
    assert {o.name: o.run["rows_in"] for o in third.outcomes}["split_youtube"] == more.appended
    assert len(scored(defn)) == first.appended + more.appended


def failing(tmp_path, stage: str):
    return load_pipeline(homelab_copy(tmp_path, replace={f'job = "jobs.{stage}"': 'job = "tests.pipelines.failing_job"'}))


def test_strict_stops_after_the_first_failed_stage(spark, tmp_path):
    defn = failing(tmp_path, "keep_articles")
    ingest(defn, generate(tmp_path, 60))
    result = run_pipeline(defn, in_process=True, strategy="strict", echo=lambda m: None)
    status = {o.name: o.status for o in result.outcomes}
    assert status == {"split_youtube": "succeeded", "keep_articles": "failed", "transcribe": "skipped",
                      "llm_summary": "skipped", "score": "skipped", "feed_day": "skipped"}
    assert not result.ok and "broken on purpose" in result.failed[0].error


def test_best_effort_runs_every_branch_not_downstream_of_the_failure(spark, tmp_path):
    defn = failing(tmp_path, "keep_articles")
    ingest(defn, generate(tmp_path, 60))
    result = run_pipeline(defn, in_process=True, strategy="best_effort", echo=lambda m: None)
    status = {o.name: o.status for o in result.outcomes}
    assert status == {"split_youtube": "succeeded", "keep_articles": "failed", "transcribe": "succeeded",
                      "llm_summary": "skipped", "score": "skipped", "feed_day": "succeeded"}
    with Source(str(defn.source)) as src:
        assert src.runs(stage="keep_articles")[0]["status"] == "failed"


def test_stage_and_from_run_only_what_was_asked(spark, tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path))
    ingest(defn, generate(tmp_path, 60))
    only = run_pipeline(defn, in_process=True, stage="split_youtube", echo=lambda m: None)
    assert [o.name for o in only.outcomes] == ["split_youtube"]
    rest = run_pipeline(defn, in_process=True, start="transcribe", echo=lambda m: None)
    assert [o.name for o in rest.outcomes] == ["transcribe", "score"]
    assert rest.outcomes[0].run["rows_in"] == only.outcomes[0].run["rows_out"]


def test_dry_run_commits_nothing(spark, tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path))
    ingest(defn, generate(tmp_path, 40))
    result = run_pipeline(defn, in_process=True, dry_run=True, echo=lambda m: None)
    assert result.ok and result.outcomes[0].run["rows_out"] > 0
    with Source(str(defn.source)) as src:
        assert src.runs(limit=100) == [] or all(r["rows_out"] == 0 for r in src.runs(limit=100))
    assert scored(defn) == {}


def test_the_examples_feed_day_counts_a_late_item_into_its_day_and_a_replay_recomputes_the_same_counts(spark, tmp_path):
    from collections import Counter
    from datetime import UTC

    from schemas.homelab import FeedDay, RssItem

    defn = load_pipeline(homelab_copy(tmp_path))
    ingest(defn, generate(tmp_path, 80))

    def expected() -> dict:
        with Source(str(defn.source)) as src:
            items = src.topic("rss.items", RssItem, dedup=("url",)).read_since(0, limit=1_000_000)
            return dict(Counter((r.data.feed, r.data.published.astimezone(UTC).date()) for r in items))

    def stored() -> dict:
        with Source(str(defn.source)) as src:
            table = src.table("rss.feed_day", FeedDay, key=("feed", "day"))
            return {(r.feed, r.day): r.items for r in table.iter_current()}

    first = run_pipeline(defn, in_process=True, stage="feed_day", echo=lambda m: None)
    assert first.ok, first.table()
    before = stored()
    assert before == expected() and len(before) > 1

    # night 2: one item of an existing feed, published on a day already counted, arrives late
    (feed, day), count = sorted(before.items())[0]
    with Source(str(defn.source)) as src:
        late = src.topic("rss.items", RssItem, dedup=("url",))
        late.append({"url": "https://example.org/late-item", "feed": feed, "title": "late", "body": "late",
                     "published": f"{day.isoformat()}T12:00:00+00:00"})
    second = run_pipeline(defn, in_process=True, stage="feed_day", echo=lambda m: None)
    assert second.ok and second.outcomes[0].run["rows_in"] == 1
    assert second.outcomes[0].run["rows_out"] == 1  # one corrected version of that day, nothing else
    after = stored()
    assert after[(feed, day)] == count + 1
    assert after == expected() and {k: v for k, v in after.items() if k != (feed, day)} == {
        k: v for k, v in before.items() if k != (feed, day)}

    # replay the whole input and run again: every touched group recomputed, the same counts, no version
    with Source(str(defn.source)) as src:
        replayed = src.topic("rss.items", RssItem, dedup=("url",)).replay("feed_day")
    assert replayed == sum(after.values())
    third = run_pipeline(defn, in_process=True, stage="feed_day", echo=lambda m: None)
    assert third.ok and third.outcomes[0].run["rows_in"] == replayed
    assert third.outcomes[0].run["rows_out"] == 0
    assert stored() == after

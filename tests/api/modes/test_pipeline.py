"""topic.pipe(fn).to(target).run(): atomic per row, batched commits, lineage, run log."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from minikafka import DuplicateMessageError, TopicNotFoundError
from tests.conftest import Cleaned


def clean(v):
    return Cleaned(creator=v.creator.strip().lower(), url=v.url, duration_min=v.length_seconds // 60)


def fill(videos, n):
    videos.extend([{"creator": f" C{i} ", "url": f"u{i}", "length_seconds": 60 * i} for i in range(n)])


@pytest.fixture
def cleaned(source):
    return source.topic("cleaned", Cleaned, dedup=("url",))


def test_run_writes_outputs_acks_inputs_and_returns_them(videos, cleaned):
    fill(videos, 3)
    out = videos.pipe(clean).to(cleaned).run()
    assert [o.duration_min for o in out] == [0, 1, 2]
    assert videos.count("handled") == 3 and cleaned.count("new") == 3
    assert videos.pipe(clean).to(cleaned).run() == []


def test_outputs_carry_lineage_to_their_source_row(videos, cleaned):
    fill(videos, 2)
    p = videos.pipe(clean).to(cleaned)
    p.run()
    recs = list(cleaned.iter_new(records=True))
    assert [(r.parent_id, r.parent_topic) for r in recs] == [(1, "videos"), (2, "videos")]
    assert {r.run_id for r in recs} == {p.last_result.run_id}


def test_pipeline_failure_leaves_the_failing_row_new_and_keeps_earlier_ones(videos, cleaned):
    fill(videos, 5)

    def flaky(v):
        if v.url == "u3":
            raise RuntimeError("model timed out")
        return clean(v)

    p = videos.pipe(flaky).to(cleaned)
    with pytest.raises(RuntimeError, match="timed out"):
        p.run(batch_size=2)
    assert [r.url for r in videos.iter_new()] == ["u3", "u4"]
    assert cleaned.count() == 3
    run = videos.source.runs(limit=1)[0]
    assert run["status"] == "failed" and "timed out" in run["error"] and run["rows_failed"] == 1


def test_duplicate_output_rolls_back_only_that_row(videos, cleaned):
    fill(videos, 3)
    cleaned.append({"creator": "x", "url": "u1", "duration_min": 9})
    with pytest.raises(DuplicateMessageError):
        videos.pipe(clean).to(cleaned).run()
    assert [r.url for r in videos.iter_new()] == ["u1", "u2"]
    assert cleaned.count() == 2


def test_invalid_output_raises_validation_error_and_keeps_row_new(videos, cleaned):
    fill(videos, 1)
    with pytest.raises(ValidationError):
        videos.pipe(lambda v: {"creator": v.creator}).to(cleaned).run()
    assert videos.count("new") == 1 and cleaned.count() == 0


def test_none_output_acks_without_writing(videos, cleaned):
    fill(videos, 2)
    videos.pipe(lambda v: None).to(cleaned).run()
    assert videos.count("handled") == 2 and cleaned.count() == 0


def test_dry_run_validates_but_writes_nothing(videos, cleaned):
    fill(videos, 2)
    out = videos.pipe(clean).to(cleaned).run(dry_run=True)
    assert len(out) == 2 and videos.count("new") == 2 and cleaned.count() == 0
    assert videos.source.runs() == []


def test_pipe_without_target_returns_raw_values_and_acks_nothing(videos):
    fill(videos, 3)
    assert videos.pipe(lambda v: v.length_seconds).run() == [0, 60, 120]
    assert videos.count("new") == 3


def test_target_by_name_and_unknown_name(source, videos, cleaned):
    fill(videos, 1)
    videos.pipe(clean).to("cleaned").run()
    assert cleaned.count() == 1
    with pytest.raises(TopicNotFoundError, match="nope") as info:
        videos.pipe(clean).to("nope")
    assert isinstance(info.value, KeyError)


def test_named_consumer_pipelines_are_independent(source, videos, cleaned):
    class Length(BaseModel):
        url: str
        seconds: int

    lengths = source.topic("lengths", Length, dedup=None)
    fill(videos, 3)
    videos.consumer("cleaner")
    videos.consumer("measurer")  # register both first: a late consumer starts from what is still new
    videos.pipe(clean, consumer="cleaner").to(cleaned).run()
    assert videos.count("new") == 3 and videos.count("new", consumer="cleaner") == 0
    videos.pipe(lambda v: Length(url=v.url, seconds=v.length_seconds), consumer="measurer").to(lengths).run()
    assert lengths.count() == 3 and cleaned.count() == 3
    assert videos.count("handled") == 3


def test_run_is_logged_with_counts(videos, cleaned):
    fill(videos, 4)
    p = videos.pipe(clean).to(cleaned)
    p.run()
    run = videos.source.runs()[0]
    assert run["run_id"] == p.last_result.run_id
    assert (run["status"], run["rows_in"], run["rows_out"], run["kind"]) == ("succeeded", 4, 4, "pipeline")
    assert run["inputs"] == ["videos"] and run["outputs"] == ["cleaned"]


def test_batches_commit_by_count(videos, cleaned, monkeypatch):
    fill(videos, 25)
    commits = []
    conn = videos.source._ledger.conn
    conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    videos.pipe(clean).to(cleaned).run(batch_size=10)
    conn.set_trace_callback(None)
    # 3 data batches + the consumer-less run log row
    assert len(commits) == 4

"""Source.full_pipeline: topological order, siblings, cycles, strict vs best_effort, plots."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from minikafka import FanOutError, PipelineCycleError


class N(BaseModel):
    key: str
    n: int


@pytest.fixture
def topics(source):
    return {name: source.topic(name, N, dedup=("key",)) for name in ("a", "b", "c", "d")}


def plus(k):
    return lambda x: N(key=x.key, n=x.n + k)


def test_downstream_sees_rows_produced_upstream_in_the_same_run(source, topics):
    a, b, c, d = topics.values()
    a.extend([{"key": "k1", "n": 1}, {"key": "k2", "n": 2}])
    # declared out of order on purpose
    source.full_pipeline(c.pipe(plus(100)).to(d), a.pipe(plus(10)).to(b), b.pipe(plus(1)).to(c)).run()
    assert [x.n for x in d.iter_new()] == [112, 113]


def test_siblings_share_one_ack_per_source_row(source, topics):
    a, b, c, _ = topics.values()
    a.append({"key": "k", "n": 1})
    results = source.full_pipeline(a.pipe(plus(1)).to(b), a.pipe(plus(2)).to(c)).run()
    assert [r[0].n for r in results] == [2, 3]
    assert a.count("handled") == 1 and b.count() == 1 and c.count() == 1


def test_strict_sibling_failure_writes_nothing_for_that_row(source, topics):
    a, b, c, _ = topics.values()
    a.extend([{"key": "ok", "n": 1}, {"key": "bad", "n": 2}])

    def fragile(x):
        if x.key == "bad":
            raise ValueError("boom")
        return N(key=x.key, n=0)

    with pytest.raises(ValueError, match="boom"):
        source.full_pipeline(a.pipe(plus(1)).to(b), a.pipe(fragile).to(c)).run()
    assert [x.key for x in a.iter_new()] == ["bad"]
    assert [x.key for x in b.iter_new()] == ["ok"] and [x.key for x in c.iter_new()] == ["ok"]


def test_best_effort_collects_failures_keeps_successes_and_leaves_parent_new(source, topics):
    a, b, c, _ = topics.values()
    a.extend([{"key": "ok", "n": 1}, {"key": "bad", "n": 2}])

    def fragile(x):
        if x.key == "bad":
            raise ValueError("flaky llm")
        return N(key=x.key, n=0)

    with pytest.raises(FanOutError) as info:
        source.full_pipeline(a.pipe(plus(1)).to(b), a.pipe(fragile).to(c)).run(strategy="best_effort")
    (failure,) = info.value.failures
    assert (failure.record_id, failure.source, failure.target) == (2, "a", "c")
    assert isinstance(failure.exception, ValueError)
    assert [x.key for x in a.iter_new()] == ["bad"]
    assert sorted(x.key for x in b.iter_new()) == ["bad", "ok"]
    assert source.runs()[0]["status"] == "partial"
    # a corrected re-run retries the parent; the kept sibling output is a duplicate and is skipped
    source.full_pipeline(a.pipe(plus(1)).to(b), a.pipe(plus(0)).to(c)).run(strategy="best_effort")
    assert a.count("new") == 0 and b.count() == 2 and c.count() == 2


def test_cycles_are_rejected_and_named_before_anything_runs(source, topics):
    a, b, c, _ = topics.values()
    a.append({"key": "k", "n": 1})
    with pytest.raises(PipelineCycleError, match="pipeline contains a cycle: a -> b -> c -> a") as info:
        source.full_pipeline(a.pipe(plus(1)).to(b), b.pipe(plus(1)).to(c), c.pipe(plus(1)).to(a)).run()
    assert isinstance(info.value, ValueError)
    assert a.count("new") == 1 and b.count() == 0


def test_bad_strategy(source, topics):
    with pytest.raises(ValueError, match="strategy"):
        source.full_pipeline(topics["a"].pipe(plus(1)).to(topics["b"])).run(strategy="yolo")


def test_plot_with_counts_and_dotted_names(source):
    items = source.topic("rss.items", N, dedup=None)
    out = source.topic("rss.out", N, dedup=None)
    items.extend([{"key": "1", "n": 1}, {"key": "2", "n": 2}])
    p = source.full_pipeline(items.pipe(plus(1)).to(out))
    p.run()
    items.append({"key": "3", "n": 3})
    assert p.plot(counts=True) == (
        "graph TD\n"
        '    rss_items["rss.items<br/>new: 1 | handled: 2"]\n'
        '    rss_out["rss.out<br/>new: 2 | handled: 0"]\n'
        "    rss_items --> rss_out"
    )

"""The Python full_pipeline API running its arms as Spark stages."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from minikafka import FanOutError, Source

pytestmark = pytest.mark.spark


class N(BaseModel):
    key: str
    n: int


def test_full_pipeline_on_spark_matches_the_python_engine(spark, tmp_path):
    def build(src):
        a, b, c = (src.topic(x, N, dedup=("key",)) for x in "abc")
        return a, b, c, src.full_pipeline(
            b.pipe(lambda x: N(key=x.key, n=x.n * 10)).to(c),
            a.pipe(lambda x: N(key=x.key, n=x.n + 1)).to(b),
        )

    outputs = {}
    for engine in ("python", "spark"):
        with Source(str(tmp_path / f"{engine}.sqlite")) as src:
            a, b, c, pipeline = build(src)
            a.extend([{"key": f"k{i}", "n": i} for i in range(5)])
            pipeline.run(engine=spark if engine == "spark" else None)
            outputs[engine] = sorted((x.key, x.n) for x in c.iter_new())
            assert a.count("new") == 0 and b.count("new") == 0
    assert outputs["spark"] == outputs["python"] == [(f"k{i}", (i + 1) * 10) for i in range(5)]


def test_best_effort_on_spark_reports_failing_rows(spark, tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        a, b = (src.topic(x, N, dedup=("key",)) for x in "ab")
        a.extend([{"key": "ok", "n": 1}, {"key": "bad", "n": 2}])

        def fragile(x):
            if x.key == "bad":
                raise ValueError("flaky")
            return x

        with pytest.raises(FanOutError) as info:
            src.full_pipeline(a.pipe(fragile).to(b)).run(strategy="best_effort", engine=spark)
        (failure,) = info.value.failures
        assert (failure.record_id, failure.source, failure.target) == (2, "a", "b")
        assert "flaky" in str(failure.exception)
        assert [x.key for x in a.iter_new()] == ["bad"] and b.count() == 1

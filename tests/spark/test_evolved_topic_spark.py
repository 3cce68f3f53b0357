"""Spark reads of a topic whose schema evolved in place: the new columns are there, old rows
read NULL or the default (issue 42 item 3)."""

from __future__ import annotations

import pytest

from minikafka import Source
from minikafka.spark import read_topic
from tests.ledger.evolve_models import Reading, ReadingV2

pytestmark = pytest.mark.spark


def test_spark_reads_the_added_columns_of_an_evolved_topic_and_keyed_table(spark, tmp_path):
    path = str(tmp_path / "l.sqlite")
    with Source(path) as src:
        src.topic("readings", Reading, dedup=("sensor",)).extend([{"sensor": "old", "value": 1}])
        src.table("state", Reading, key="sensor").upsert({"sensor": "a", "value": 1})
        src.evolve("readings", ReadingV2)
        src.evolve("state", ReadingV2)
        src.topic("readings", ReadingV2, dedup=("sensor",)).append(
            {"sensor": "new", "value": 2, "unit": "C", "calibrated": True})
        src.table("state", ReadingV2, key="sensor").upsert({"sensor": "b", "value": 2, "unit": "K"})
        rows = {r["sensor"]: r for r in read_topic(spark, src, "readings").collect()}
        assert (rows["old"]["unit"], rows["old"]["calibrated"]) == (None, False)
        assert (rows["new"]["unit"], rows["new"]["calibrated"]) == ("C", True)
        state = {r["sensor"]: r["unit"] for r in src.topic("state", ReadingV2, dedup=None).to_spark(spark).collect()}
        assert state == {"a": None, "b": "K"}

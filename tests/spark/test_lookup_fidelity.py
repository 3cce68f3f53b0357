"""Every type identical through a lookup: a plain topic and a keyed table read whole beside a
stage's new rows, first over JDBC, then from the lookup's cached copy (a Parquet round trip)."""

from __future__ import annotations

import pytest

from minikafka import Source
from minikafka.spark import Stage, run_stage
from tests.spark.test_read import EDGE_ROWS, AllTypes

pytestmark = pytest.mark.spark

FIELDS = list(AllTypes.model_fields)


def _joined(frames):
    # each new fact keeps only its join key; every other column comes from the lookup
    facts = frames["facts"].select("_id", "text")
    return facts.join(frames["refs"], "text").select("_id", *FIELDS)


@pytest.mark.parametrize("kind", ["topic", "table"])
def test_every_type_is_identical_through_a_lookup_read_over_jdbc_and_from_its_cached_copy(spark, tmp_path, kind):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        facts = src.topic("facts", AllTypes, dedup=None)
        if kind == "topic":
            src.topic("refs", AllTypes, dedup=None).extend(EDGE_ROWS)
        else:
            src.table("refs", AllTypes, key=("text",)).upsert_many(EDGE_ROWS)
        out = src.topic("out", AllTypes, dedup=None)
        stage = Stage("enrich", ["facts"], ["out"], transform=_joined, lookups=["refs"])
        expected = [AllTypes.model_validate(r) for r in EDGE_ROWS]

        reads = []
        for night in (1, 2):
            facts.extend(EDGE_ROWS)
            run = run_stage(spark, src, stage)
            assert (run.status, run.rows_in, run.rows_out) == ("succeeded", 3, 3), run.error
            reads.append(run.details["lookups"]["refs"]["cached"])
            new = [r.data for r in out.read_since(3 * (night - 1), limit=10)]
            assert sorted(new, key=lambda m: m.big) == sorted(expected, key=lambda m: m.big), night
        # night 1 read the ledger (and wrote the copy); night 2 read the copy, the lookup unchanged
        assert not reads[0] and reads[1], reads
        # stored the same as rows appended from Python, byte for byte (decimals at the model's scale)
        cols = ", ".join(f'"{f}"' for f in FIELDS if f != "money")
        conn = src.ledger.conn
        stored = conn.execute(f'SELECT {cols} FROM "out" ORDER BY "big", "_id"').fetchall()
        direct = conn.execute(f'SELECT {cols} FROM "facts" ORDER BY "big", "_id"').fetchall()
        assert stored == direct

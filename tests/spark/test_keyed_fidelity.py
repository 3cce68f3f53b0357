"""Every type identical through a keyed table written by a Spark stage, read back four ways:
Python (``iter_current``), Arrow (``to_arrow``), Spark (JDBC) and plain SQL (``"T:current"``)."""

from __future__ import annotations

from datetime import timezone

import pytest

from minikafka import Source
from minikafka.spark import Stage, read_topic, run_stage
from tests.spark.test_read import EDGE_ROWS, AllTypes

pytestmark = pytest.mark.spark

FIELDS = list(AllTypes.model_fields)


def test_every_type_is_identical_through_a_keyed_table_a_spark_stage_writes(spark, tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        facts = src.topic("all_types", AllTypes, dedup=None)
        facts.extend(EDGE_ROWS)
        table = src.table("all_t", AllTypes, key=("text",))
        stage = Stage("copy", ["all_types"], ["all_t"], transform=lambda df: df.select("_id", *FIELDS))
        run = run_stage(spark, src, stage)
        assert (run.status, run.rows_out, run.details["tables"]["all_t"]["inserted"]) == ("succeeded", 3, 3)
        expected = [AllTypes.model_validate(r) for r in EDGE_ROWS]

        # Python
        assert list(table.iter_current()) == expected
        # Arrow: the same table as the plain topic's
        assert table.to_arrow().select(FIELDS).equals(facts.to_arrow().select(FIELDS))
        # Spark (JDBC): the versions, one per key here
        rows = sorted(read_topic(spark, src, "all_t", which="all").collect(), key=lambda r: r["_id"])
        back = [AllTypes.model_validate({**r.asDict(recursive=True), "at": r["at"].replace(tzinfo=timezone.utc)})
                for r in rows]
        assert back == expected
        assert [r["_parent_id"] for r in rows] == [1, 2, 3]
        # plain SQL: the view gives the stored versions byte for byte, and they decode to the same values
        # (a Spark write stores a decimal at its model's scale: '0.000000000' where Python stored '0')
        cols = ", ".join(f'"{f}"' for f in FIELDS)
        conn = src.ledger.conn
        viewed = conn.execute(f'SELECT {cols} FROM "all_t:current" ORDER BY "_id"').fetchall()
        assert viewed == conn.execute(f'SELECT {cols} FROM "all_t" ORDER BY "_id"').fetchall()
        decode = table.layout.decoder()
        meta = conn.execute(f'{table.layout.select_sql()} ORDER BY "_id"').fetchall()
        assert [decode(r) for r in meta] == [decode(r) for r in conn.execute(
            f'{facts.layout.select_sql()} ORDER BY "_id"').fetchall()]
        assert [r[FIELDS.index("money")] for r in viewed] == ["123456789012345678901.123456789", "-0.000000001",
                                                              "0.000000000"]

        # the same rows again (replayed): every key unchanged, no version written
        facts.extend(EDGE_ROWS)
        again = run_stage(spark, src, stage)
        assert (again.rows_in, again.rows_out, again.rows_duplicate) == (3, 0, 3)
        assert again.details["tables"]["all_t"] == {"rows": 3, "inserted": 0, "updated": 0, "unchanged": 3}
        assert table.count() == 3

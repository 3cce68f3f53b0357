"""Keyed tables through the Python API: upserts, merge functions, the catalog, the changelog
consumers see, compaction, the ``:current`` view."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest
from pydantic import BaseModel

from minikafka import InvalidRecordError, KeyedTable, SchemaMismatchError, Source
from minikafka.errors import InvalidSettingError


class Daily(BaseModel):
    carrier: str
    day: date
    n: int = 0
    total: float = 0.0
    late: int | None = None
    seen: datetime | None = None
    note: str = ""


def day(n: int) -> date:
    return date(2024, 1, n)


@pytest.fixture
def table(source):
    return source.table("daily", Daily, key=("carrier", "day"))


@pytest.fixture
def sums(source):
    return source.table("sums", Daily, key=("carrier", "day"),
                        merge={"n": "sum", "total": "sum", "late": "max", "seen": "min", "note": "first"})


def test_an_upsert_of_a_new_key_inserts_and_of_a_known_key_replaces_its_row(table):
    table.upsert({"carrier": "AA", "day": day(1), "n": 1, "note": "a"})
    table.upsert({"carrier": "UA", "day": day(1), "n": 2})
    got = table.upsert({"carrier": "AA", "day": day(1), "n": 5})
    assert got.data.n == 5 and got.data.note == ""
    assert table.get("AA", day(1)).n == 5 and table.get(carrier="UA", day="2024-01-01").n == 2
    assert table.get("AA", day(2)) is None
    assert table.count_current() == 2 and table.count() == 3  # three versions, two keys
    assert [r.n for r in table.iter_current()] == [2, 5]  # id order


def test_merge_functions_combine_a_keys_rows(sums):
    t1, t2 = datetime(2024, 1, 1, 5, tzinfo=timezone.utc), datetime(2024, 1, 1, 3, tzinfo=timezone.utc)
    sums.upsert({"carrier": "AA", "day": day(1), "n": 2, "total": 1.5, "late": None, "seen": t1, "note": "first"})
    sums.upsert({"carrier": "AA", "day": day(1), "n": 3, "total": 1.0, "late": 7, "seen": t2, "note": "second"})
    sums.upsert({"carrier": "AA", "day": day(1), "n": 1, "total": 0.5, "late": 4, "seen": None, "note": "third"})
    row = sums.get("AA", day(1))
    assert (row.n, row.total, row.late, row.seen, row.note) == (6, 3.0, 7, t2, "first")


def test_rows_of_one_key_in_one_upsert_many_fold_in_order_into_one_version(sums, table):
    got = sums.upsert_many([{"carrier": "AA", "day": day(1), "n": 1, "note": "x"},
                            {"carrier": "UA", "day": day(1), "n": 10},
                            {"carrier": "AA", "day": day(1), "n": 2, "late": 3, "note": "y"}])
    assert (got.rows, got.inserted, got.updated, got.versions) == (3, 2, 0, 2)
    assert sums.get("AA", day(1)).n == 3 and sums.get("AA", day(1)).note == "x" and sums.get("AA", day(1)).late == 3
    table.upsert_many([{"carrier": "AA", "day": day(1), "n": 1}, {"carrier": "AA", "day": day(1), "n": 2}])
    assert table.get("AA", day(1)).n == 2 and table.count() == 1  # replace: the last row wins, one version


def test_an_upsert_that_changes_nothing_writes_no_version(table):
    table.upsert({"carrier": "AA", "day": day(1), "n": 1})
    again = table.upsert_many([{"carrier": "AA", "day": day(1), "n": 1}])
    assert (again.unchanged, again.versions, again.first_id) == (1, 0, None)
    assert table.count() == 1


def test_append_extend_and_pipes_into_a_table_merge_by_key(source, table):
    table.append({"carrier": "AA", "day": day(1), "n": 1})
    table.extend([{"carrier": "AA", "day": day(1), "n": 2}, {"carrier": "UA", "day": day(1), "n": 3}])
    reopened = source.topic("daily", Daily, dedup=None)
    assert isinstance(reopened, KeyedTable)  # opened as a topic, it still merges
    reopened.append({"carrier": "UA", "day": day(1), "n": 4})
    assert {(r.carrier, r.n) for r in table.iter_current()} == {("AA", 2), ("UA", 4)}

    class Fact(BaseModel):
        carrier: str
        n: int

    facts = source.topic("facts", Fact, dedup=None)
    facts.extend([{"carrier": "AA", "n": 9}, {"carrier": "DL", "n": 1}])
    facts.pipe(lambda f: Daily(carrier=f.carrier, day=day(1), n=f.n), consumer="to-daily").to(table).run()
    assert table.get("AA", day(1)).n == 9 and table.get("DL", day(1)).n == 1
    assert table.record("DL", day(1)).parent_topic == "facts"


def test_a_consumer_of_a_table_sees_new_and_changed_keys_as_its_new_rows(source, sums):
    sums.consumer("downstream")
    sums.upsert_many([{"carrier": "AA", "day": day(1), "n": 1}, {"carrier": "UA", "day": day(1), "n": 1}])
    first = list(sums.iter_new(records=True, consumer="downstream"))
    assert [(r.data.carrier, r.data.n) for r in first] == [("AA", 1), ("UA", 1)]
    for r in first:
        r.ack()
    sums.upsert_many([{"carrier": "AA", "day": day(1), "n": 4}, {"carrier": "DL", "day": day(2), "n": 1},
                      {"carrier": "UA", "day": day(1), "n": 0}])  # UA: +0 changes nothing
    changes = [(r.carrier, r.n) for r in sums.iter_new(consumer="downstream")]
    assert changes == [("AA", 5), ("DL", 1)]  # the changed row whole, not the delta


def test_reopening_a_table_with_another_key_or_merge_raises_before_writing(source, sums):
    sums.upsert({"carrier": "AA", "day": day(1)})
    with pytest.raises(SchemaMismatchError, match="different key"):
        source.table("sums", Daily, key=("carrier",), merge={"n": "sum"})
    with pytest.raises(SchemaMismatchError, match="different merge functions"):
        source.table("sums", Daily, key=("carrier", "day"), merge={"n": "max"})
    source.topic("plain", Daily, dedup=None)
    with pytest.raises(SchemaMismatchError, match="plain topic, not a keyed table"):
        source.table("plain", Daily, key=("carrier",))
    assert source.topics() == ["plain", "sums"] and sums.count() == 1
    same = source.table("sums", Daily, key=("carrier", "day"), merge={"total": "sum", "n": "sum", "late": "max",
                                                                       "seen": "min", "note": "first"})
    assert same.merge == sums.merge


@pytest.mark.parametrize("key, merge, match", [
    ((), None, "at least one field"),
    (("nope",), None, "key field 'nope'"),
    (("carrier",), {"nope": "sum"}, "merge field 'nope'"),
    (("carrier",), {"carrier": "sum"}, "is a key field"),
    (("carrier",), {"n": "avg"}, "unknown merge function 'avg'"),
    (("carrier",), {"note": "sum"}, "'sum' needs an int or float"),
    (("carrier",), {"day": "sum"}, "'sum' needs an int or float"),
])
def test_a_bad_key_or_merge_is_refused_naming_it_and_nothing_is_created(source, key, merge, match):
    with pytest.raises(InvalidSettingError, match=match):
        source.table("bad", Daily, key=key, merge=merge)
    assert source.topics() == []


def test_a_sum_beyond_64_bits_is_refused_and_nothing_is_stored(sums):
    sums.upsert({"carrier": "AA", "day": day(1), "n": 2**63 - 1})
    with pytest.raises(InvalidRecordError):
        sums.upsert({"carrier": "AA", "day": day(1), "n": 1})
    with pytest.raises(InvalidRecordError):
        sums.upsert_many([{"carrier": "UA", "day": day(1), "n": 2**63 - 1}, {"carrier": "UA", "day": day(1), "n": 1}])
    assert sums.get("AA", day(1)).n == 2**63 - 1 and sums.count() == 1


def test_the_current_view_gives_plain_sql_one_row_per_key(source, sums):
    sums.upsert_many([{"carrier": "AA", "day": day(1), "n": 1}, {"carrier": "UA", "day": day(1), "n": 2}])
    sums.upsert({"carrier": "AA", "day": day(1), "n": 10})
    rows = source.ledger.conn.execute('SELECT carrier, day, n FROM "sums:current" ORDER BY carrier').fetchall()
    assert rows == [("AA", "2024-01-01", 11), ("UA", "2024-01-01", 2)]
    assert source.ledger.conn.execute('SELECT count(*) FROM "sums"').fetchone()[0] == 3


def test_compaction_deletes_superseded_versions_once_every_consumer_acked_them(source, table):
    table.consumer("slow")
    table.consumer("fast")
    table.upsert({"carrier": "AA", "day": day(1), "n": 1})  # id 1
    table.upsert({"carrier": "AA", "day": day(1), "n": 2})  # id 2 supersedes 1
    table.upsert({"carrier": "AA", "day": day(1), "n": 3})  # id 3 supersedes 2
    for r in table.iter_new(records=True, consumer="fast"):
        r.ack()
    assert table.compact() == 0  # "slow" has read nothing: it keeps versions 1 and 2
    assert [r.n for r in table.iter_new(consumer="slow")] == [1, 2, 3]
    table.set_handled(1, consumer="slow")
    assert table.compact() == 1  # version 1 only; 2 is still unread by "slow"
    assert [r.n for r in table.iter_new(consumer="slow")] == [2, 3]
    table.set_handled(2, consumer="slow")
    table.set_handled(3, consumer="slow")
    assert table.compact() == 1 and table.count() == 1  # the current version stays
    assert table.get("AA", day(1)).n == 3 and table.compact() == 0
    table.upsert({"carrier": "AA", "day": day(1), "n": 4})
    assert table.by_id(4).data.n == 4 and table.count("new", consumer="slow") == 1


def test_without_consumers_compaction_keeps_only_the_current_rows(table):
    table.upsert_many([{"carrier": c, "day": day(1), "n": 1} for c in "ABC"])
    table.upsert_many([{"carrier": c, "day": day(1), "n": 2} for c in "AB"])
    assert table.compact() == 2
    assert table.count() == 3 and [r.carrier for r in table.iter_current()] == ["C", "A", "B"]
    assert table.to_arrow().column("n").to_pylist() == [1, 2, 2]


def test_current_rows_to_arrow_and_versions_to_arrow(table):
    table.upsert_many([{"carrier": "AA", "day": day(1), "n": 1}, {"carrier": "UA", "day": day(1), "n": 1}])
    table.upsert({"carrier": "AA", "day": day(1), "n": 2})
    current = table.to_arrow()
    assert current.column("carrier").to_pylist() == ["UA", "AA"] and current.column("_id").to_pylist() == [2, 3]
    assert table.to_arrow(current=False).num_rows == 3 and table.to_arrow("new").num_rows == 3


def test_a_table_survives_reopening_the_file(db_path):
    with Source(db_path) as src:
        src.table("daily", Daily, key=("carrier", "day"), merge={"n": "sum"}).upsert(
            {"carrier": "AA", "day": day(1), "n": 1})
    with Source(db_path) as src:
        t = src.table("daily", Daily, key=("carrier", "day"), merge={"n": "sum"})
        t.upsert({"carrier": "AA", "day": day(1), "n": 1})
        assert t.get("AA", day(1)).n == 2
    with Source(db_path, read_only=True) as src:
        assert src.table("daily", Daily, key=("carrier", "day"), merge={"n": "sum"}).get("AA", day(1)).n == 2


def test_the_compact_command_compacts_every_keyed_table_and_refuses_a_plain_topic(db_path):
    from click.testing import CliRunner

    from minikafka.cli.app import main

    with Source(db_path) as src:
        t = src.table("daily", Daily, key=("carrier", "day"))
        t.upsert({"carrier": "AA", "day": day(1), "n": 1})
        t.upsert({"carrier": "AA", "day": day(1), "n": 2})
        src.topic("plain", Daily, dedup=None)
    out = CliRunner().invoke(main, ["compact", "--source", db_path])
    assert out.exit_code == 0 and "daily: 1 superseded version(s) deleted" in out.output
    out = CliRunner().invoke(main, ["compact", "plain", "--source", db_path])
    assert out.exit_code == 1 and "'plain' is not a keyed table" in out.output
    with Source(db_path) as src:
        assert src.table("daily", Daily, key=("carrier", "day")).count() == 1


def test_a_table_refuses_retention_by_age_and_migration(table):
    with pytest.raises(InvalidSettingError, match="compact"):
        table.set_retention("7d")
    with pytest.raises(SchemaMismatchError, match="not supported"):
        table.migrate(Daily, lambda r: r)

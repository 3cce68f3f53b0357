"""Lookups: topics and keyed tables a stage reads whole, in its plan's snapshot, never acked."""

from __future__ import annotations

import os

import pytest
from pydantic import BaseModel
from pyspark.sql import functions as F
from pyspark.storagelevel import StorageLevel

from minikafka import Source
from minikafka.errors import PipelineError
from minikafka.ledger.topics import acks
from minikafka.spark import Stage, run_stage
from minikafka.spark.engine import connect, engine_of
from minikafka.spark.stages import lookup as lookup_module
from minikafka.spark.staging import choose_staging, filesystem

pytestmark = pytest.mark.spark


class Flight(BaseModel):
    flight_id: int
    carrier: str


class Airline(BaseModel):
    carrier: str
    name: str


class Enriched(BaseModel):
    flight_id: int
    carrier: str
    airline: str | None = None


def enrich(frames):
    flights, airlines = frames["flights"], frames["airlines"]
    return (flights.join(airlines.withColumnRenamed("name", "airline"), "carrier", "left")
            .select("_id", "flight_id", "carrier", "airline"))


@pytest.fixture
def ledger(tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        src.topic("flights", Flight, dedup=("flight_id",))
        src.topic("airlines", Airline, dedup=("carrier",))
        src.topic("enriched", Enriched, dedup=("flight_id",))
        yield src


def stage(**kw) -> Stage:
    return Stage("enrich", ["flights"], ["enriched"], transform=kw.pop("transform", enrich), lookups=["airlines"],
                 **kw)


def flights(ledger, rows):
    ledger.topic("flights", Flight, dedup=("flight_id",)).extend([{"flight_id": i, "carrier": c} for i, c in rows])


def airlines(ledger, rows):
    ledger.topic("airlines", Airline, dedup=("carrier",)).extend([{"carrier": c, "name": n} for c, n in rows])


def enriched(ledger) -> dict[int, str | None]:
    table = ledger.topic("enriched", Enriched, dedup=("flight_id",)).to_arrow().to_pylist()
    return {r["flight_id"]: r["airline"] for r in table}


def test_second_night_facts_still_join_to_reference_rows_the_first_night_read(spark, ledger):
    airlines(ledger, [("AA", "American"), ("UA", "United")])
    flights(ledger, [(1, "AA"), (2, "UA")])
    assert run_stage(spark, ledger, stage()).rows_out == 2
    flights(ledger, [(3, "AA"), (4, "UA")])  # night 2: no new airline, the lookup still holds them all
    run = run_stage(spark, ledger, stage())
    assert (run.rows_in, run.rows_out) == (2, 2)
    assert enriched(ledger) == {1: "American", 2: "United", 3: "American", 4: "United"}
    # a lookup is never acked: the stage has no consumer on it, nothing is pending for it
    assert acks.find_consumer(ledger.ledger.conn, "airlines", "enrich") is None
    assert run.details["lookups"]["airlines"]["rows"] == 2


def test_a_lookup_frame_holds_the_model_fields_only(spark, ledger):
    seen = {}

    def look(frames):
        seen["columns"] = frames["airlines"].columns
        return enrich(frames)

    airlines(ledger, [("AA", "American")])
    flights(ledger, [(1, "AA")])
    run_stage(spark, ledger, stage(transform=look))
    assert seen["columns"] == ["carrier", "name"]


def test_a_row_appended_to_the_lookup_after_the_plan_is_not_read(spark, ledger):
    airlines(ledger, [("AA", "American")])
    flights(ledger, [(1, "AA"), (2, "UA")])

    def late(frames):  # the plan is fixed: a reference row committed now is after it
        airlines(ledger, [("UA", "United")])
        return enrich(frames)

    run = run_stage(spark, ledger, stage(transform=late))
    assert enriched(ledger) == {1: "American", 2: None}  # the late reference: unmatched (a left join)
    assert run.details["lookups"]["airlines"]["upto"] == 1


def test_a_table_lookup_reads_the_current_version_of_each_key_as_of_the_plan(spark, ledger):
    table = ledger.table("carriers", Airline, key="carrier")
    table.upsert_many([{"carrier": "AA", "name": "American"}, {"carrier": "UA", "name": "Uni"}])
    table.upsert({"carrier": "UA", "name": "United"})  # supersedes "Uni"
    flights(ledger, [(1, "AA"), (2, "UA")])

    def join(frames):
        seen["rows"] = sorted(tuple(r) for r in frames["carriers"].collect())
        table.upsert({"carrier": "AA", "name": "After the plan"})  # a version the read must not see
        return (frames["flights"].join(frames["carriers"].withColumnRenamed("name", "airline"), "carrier", "left")
                .select("_id", "flight_id", "carrier", "airline"))

    seen = {}
    run = run_stage(spark, ledger, Stage("enrich", ["flights"], ["enriched"], transform=join, lookups=["carriers"]))
    assert seen["rows"] == [("AA", "American"), ("UA", "United")]
    assert enriched(ledger) == {1: "American", 2: "United"}
    assert run.details["lookups"]["carriers"] | {"seconds": 0} == {
        "rows": 2, "upto": 3, "table": True, "cached": False, "seconds": 0}


def night(any_spark, ledger, **kw):
    """One run of the stage as a warm engine runs it: on a Connect session of its own, released
    when the stage ends (a stage client process); on the shared session when classic."""
    url = engine_of(any_spark)
    if url is None:
        return run_stage(any_spark, ledger, stage(**kw))
    session = connect(url, new=True, conf={"spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"})
    try:
        return run_stage(session, ledger, stage(**kw))
    finally:
        session.stop()


def copies(any_spark, ledger) -> tuple[str, list[str]]:
    """(the airlines lookup's copy folder URI, the names of the copies in it)."""
    ledger_id = ledger.ledger.conn.execute("SELECT value FROM _minikafka_meta WHERE key='ledger_id'").fetchone()[0]
    folder = lookup_module.topic_cache_uri(choose_staging("local[1]", None, ledger.path), ledger_id, "airlines")
    return folder, sorted(n for n in os.listdir(filesystem(folder)[1]) if not n.startswith("."))


def in_memory(any_spark, uri: str) -> bool:
    return any_spark.read.parquet(uri).storageLevel != StorageLevel.NONE


def test_an_unchanged_lookup_is_read_from_its_cached_copy_and_a_changed_one_again(any_spark, ledger, monkeypatch):
    jdbc_reads = []
    real = lookup_module._read_ledger
    monkeypatch.setattr(lookup_module, "_read_ledger", lambda *a: jdbc_reads.append(a[2].name) or real(*a))
    on_engine = engine_of(any_spark) is not None
    airlines(ledger, [("AA", "American")])
    flights(ledger, [(1, "AA")])
    first = night(any_spark, ledger)
    flights(ledger, [(2, "AA")])
    second = night(any_spark, ledger)  # the lookup unchanged: on an engine, the copy the first run left in memory
    assert [first.details["lookups"]["airlines"]["cached"], second.details["lookups"]["airlines"]["cached"]] \
        == [False, "memory" if on_engine else "disk"]
    assert jdbc_reads == ["airlines"]
    folder, [old] = copies(any_spark, ledger)
    airlines(ledger, [("UA", "United")])
    flights(ledger, [(3, "UA")])
    third = night(any_spark, ledger)
    assert third.details["lookups"]["airlines"]["cached"] is False and jdbc_reads == ["airlines", "airlines"]
    assert enriched(ledger) == {1: "American", 2: "American", 3: "United"}
    _, names = copies(any_spark, ledger)
    [new] = [n for n in names if n != old]
    # the old copy is released from the engine's memory (still on disk for a concurrent run), the new one held
    assert (in_memory(any_spark, f"{folder}/{old}"), in_memory(any_spark, f"{folder}/{new}")) == (False, on_engine)
    monkeypatch.setattr(lookup_module, "KEEP_UNUSED_SECONDS", 0.0)
    airlines(ledger, [("DL", "Delta")])
    flights(ledger, [(4, "DL")])
    assert night(any_spark, ledger).details["lookups"]["airlines"]["cached"] is False
    assert enriched(ledger)[4] == "Delta"
    assert copies(any_spark, ledger)[1] == [f"{lookup_module.CACHE_FORMAT}-3-3-"
                                            f"{ledger.layout('airlines').fingerprint[:16]}"]  # the old copies removed


def test_a_stage_on_an_engine_releases_what_its_transform_persisted_and_keeps_its_lookup(any_spark, ledger):
    if engine_of(any_spark) is None:
        pytest.skip("a classic session clears its own cache when a stage ends")
    spark = any_spark
    held = {}

    def persisting(frames):
        held["frame"] = frames["flights"].persist()
        return enrich({**frames, "flights": held["frame"]})

    airlines(ledger, [("AA", "American")])
    flights(ledger, [(1, "AA")])
    run_stage(spark, ledger, stage(transform=persisting))
    folder, [copy] = copies(spark, ledger)
    assert (held["frame"].storageLevel == StorageLevel.NONE, in_memory(spark, f"{folder}/{copy}")) == (True, True)


def test_a_lookup_on_the_exchange_staging_path_joins_as_over_jdbc(spark, ledger, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    airlines(ledger, [("AA", "American"), ("UA", "United")])
    flights(ledger, [(1, "AA"), (2, "UA"), (3, "DL")])
    run = run_stage(spark, ledger, stage(), staging=str(shared))
    assert run.details["staging"] == "exchange"
    assert enriched(ledger) == {1: "American", 2: "United", 3: None}
    assert any((shared / lookup_module.CACHE_DIR).rglob("_SUCCESS"))  # the copy lives where every node sees it
    flights(ledger, [(4, "UA")])
    assert run_stage(spark, ledger, stage(), staging=str(shared)).details["lookups"]["airlines"]["cached"] == "disk"
    assert enriched(ledger)[4] == "United"


def test_a_lookup_that_is_also_an_input_or_output_or_with_row_fn_is_refused():
    with pytest.raises(PipelineError, match="lookup 'flights' is also an input"):
        Stage("s", ["flights"], ["out"], transform=lambda f: f, lookups=["flights"])
    with pytest.raises(PipelineError, match="lookup 'out' is also an output"):
        Stage("s", ["flights"], ["out"], transform=lambda f: f, lookups=["out"])
    with pytest.raises(PipelineError, match="row_fn stage cannot take lookups"):
        Stage("s", ["flights"], ["out"], row_fn=lambda r: r, lookups=["airlines"])


def test_several_inputs_and_lookups_arrive_in_one_dict(spark, ledger):
    seen = {}

    def both(frames):
        seen["keys"] = sorted(frames)
        return frames["flights"].select("_id", "flight_id", "carrier", F.lit(None).cast("string").alias("airline"))

    airlines(ledger, [("AA", "American")])
    flights(ledger, [(1, "AA")])
    run_stage(spark, ledger, stage(transform=both))
    assert seen["keys"] == ["airlines", "flights"]

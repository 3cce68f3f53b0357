"""A nightly pipeline as a data engineer builds it: facts joined to two reference topics
(lookups), a per-carrier daily average kept in a keyed table, late rows on later nights,
a kill -9 in the middle of a night, a replay and a re-run. After every night each enriched
flight is matched where its reference existed before the run, and every average equals the
same computation done with pandas on the source data.

The data (tests/pipelines/flights/data.py) and the pipeline (flights/flights.toml, jobs in
flights/jobs/) are small: three nights of a few hundred rows.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.util.faults import ENV
from tests.cli.helpers import invoke
from tests.pipelines.flights.data import AIRLINES, LATE_CARRIER, NIGHTS, day_of, nights
from tests.pipelines.flights.models import Airline, Weather
from tests.pipelines.helpers import ROOT

pytestmark = [pytest.mark.spark]

HERE = Path(__file__).resolve().parent / "flights"
DATA = nights()
TOPICS = ("flights", "airlines", "weather", "flights.clean", "flights.cancelled", "flights.enriched", "carrier_day")
KILL_POINT = "keyed:versions-inserted"  # inside carrier_day's merge commit: clean and enrich have committed


def pipeline_file(folder: Path) -> Path:
    """flights.toml with its ledger in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "flights.toml"
    path.write_text((HERE / "flights.toml").read_text().replace('source = "flights.sqlite"',
                                                               f'source = "{folder / "flights.sqlite"}"'))
    return path


def ingest(pipeline: Path, night: int) -> None:
    """The night's dumps: the flights with `minikafka ingest`, the reference data by Python appends."""
    dump = pipeline.parent / f"flights-{night}.jsonl"
    dump.write_text("".join(json.dumps(row) + "\n" for row in DATA[night]["flights"]))
    out = invoke("ingest", pipeline, "flights", dump)
    assert out.exit_code == 0, out.output
    with Source(str(pipeline.parent / "flights.sqlite")) as source:
        source.topic("airlines", Airline, dedup=("carrier",)).extend(DATA[night]["airlines"])
        source.topic("weather", Weather, dedup=("origin", "day", "hour")).extend(DATA[night]["weather"])


def run(pipeline: Path):
    from minikafka.pipelines.definition import load_pipeline
    from minikafka.pipelines.runner import run_pipeline

    result = run_pipeline(load_pipeline(pipeline), in_process=True, echo=lambda line: None)
    assert result.ok, result.table()
    return {o.name: o.run or {} for o in result.outcomes}


def query(pipeline: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(pipeline.parent / "flights.sqlite") as db:
        return db.execute(sql).fetchall()


def snapshot(pipeline: Path) -> dict[str, list[tuple]]:
    """Every row of every topic and table by content: its fields, its status and its parent row's
    fields (row ids depend on the order Spark wrote a stage's output, which another Spark
    application may choose differently), and the table's current rows."""
    rows, fields_of = {}, {}
    with sqlite3.connect(pipeline.parent / "flights.sqlite") as db:
        for topic in TOPICS:
            cursor = db.execute(f'SELECT * FROM "{topic}:status"')
            names = [d[0] for d in cursor.description]
            rows[topic] = [dict(zip(names, row)) for row in cursor.fetchall()]
            fields_of[topic] = {r["_id"]: tuple(v for k, v in r.items() if not k.startswith("_")) for r in rows[topic]}
        current = db.execute('SELECT carrier, day, flights, avg_dep_delay FROM "carrier_day:current"').fetchall()
    out = {}
    for topic, found in rows.items():
        out[topic] = sorted((fields_of[topic][r["_id"]], r["_status"], r["_parent_topic"],
                             fields_of.get(r["_parent_topic"], {}).get(r["_parent_id"])) for r in found)
    out["carrier_day:current"] = sorted(current)
    return out


def source_flights(upto: int):
    """The source data of nights 1..upto as pandas sees it: one row per flight (its first
    arrival wins, as the ledger's dedup), with the night it first arrived."""
    import pandas as pd

    rows = [dict(f, night=n) for n in range(1, upto + 1) for f in DATA[n]["flights"]]
    return pd.DataFrame(rows).drop_duplicates("flight_id", keep="first")


def pandas_averages(upto: int) -> dict[tuple[str, str], tuple[int, float]]:
    flights = source_flights(upto)
    flown = flights[flights["dep_delay"].notna()]
    per = flown.groupby(["carrier", "day"])["dep_delay"].agg(["size", "mean"])
    return {key: (int(n), float(mean)) for key, (n, mean) in per.iterrows()}


def check_night(pipeline: Path, night: int) -> None:
    flights = source_flights(night)
    weather = {(w["origin"], w["day"], w["hour"]): w["temp"] for n in range(1, night + 1) for w in DATA[n]["weather"]}
    enriched = {r[0]: r[1:] for r in query(pipeline, 'SELECT flight_id, carrier, airline, origin, day, hour, temp '
                                                     'FROM "flights.enriched"')}
    flown = flights[flights["dep_delay"].notna()]
    assert sorted(enriched) == sorted(flown["flight_id"])
    for f in flown.itertuples():
        carrier, airline, _origin, _day, _hour, temp = enriched[f.flight_id]
        known = carrier != LATE_CARRIER or f.night >= 2  # the reference existed before the flight's night ran
        assert airline == (AIRLINES[carrier] if known else None), f.flight_id
        assert temp == weather[(f.origin, f.day, f.hour)], f.flight_id  # late flights too
    cancelled = {r[0] for r in query(pipeline, 'SELECT flight_id FROM "flights.cancelled"')}
    assert cancelled == set(flights[flights["dep_delay"].isna()]["flight_id"])
    stored = {(c, d): (n, a) for c, d, n, a in query(pipeline, 'SELECT carrier, day, flights, avg_dep_delay '
                                                              'FROM "carrier_day:current"')}
    expected = pandas_averages(night)
    assert stored.keys() == expected.keys()
    for key, (n, mean) in expected.items():
        assert stored[key][0] == n and stored[key][1] == pytest.approx(mean, rel=1e-12), key


@pytest.fixture(scope="module")
def nightly(tmp_path_factory, spark):
    """Nights 1..3 on one ledger; a copy of the ledger as it was after night 2 (for the kill)."""
    pipeline = pipeline_file(tmp_path_factory.mktemp("flights"))
    runs = {}
    for night in range(1, NIGHTS + 1):
        if night == NIGHTS:
            copy = pipeline_file(tmp_path_factory.mktemp("killed"))
            with sqlite3.connect(pipeline.parent / "flights.sqlite") as src, \
                    sqlite3.connect(copy.parent / "flights.sqlite") as dst:
                src.backup(dst)
        ingest(pipeline, night)
        runs[night] = run(pipeline)
        check_night(pipeline, night)
    return {"pipeline": pipeline, "runs": runs, "after_night_2": copy, "final": snapshot(pipeline)}


def test_every_night_matches_where_the_reference_existed_and_every_average_equals_pandas(nightly):
    runs, pipeline = nightly["runs"], nightly["pipeline"]
    # the data holds what the nights must absorb: late flights, an airline a night late, re-sent rows
    flights = source_flights(NIGHTS)
    assert sum(f.day != day_of(f.night).isoformat() for f in flights.itertuples()) >= 10
    unmatched = query(pipeline, 'SELECT carrier, day FROM "flights.enriched" WHERE airline IS NULL')
    assert unmatched and {c for c, _ in unmatched} == {LATE_CARRIER}
    assert runs[2]["enrich"]["rows_in"] > 0 and runs[2]["clean"]["rows_duplicate"] > 0
    # late flights corrected their days: the groups of earlier days have more versions than keys
    versions_of_old_days = query(pipeline, "SELECT COUNT(*) FROM \"carrier_day\" WHERE day < '2013-01-03'")[0][0]
    current_old_days = query(pipeline, "SELECT COUNT(*) FROM \"carrier_day:current\" WHERE day < '2013-01-03'")[0][0]
    assert versions_of_old_days > current_old_days  # some old days were corrected by late flights


def kill_mid_run(pipeline: Path) -> None:
    env = {**os.environ, ENV: KILL_POINT, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "run", str(pipeline), "--in-process"], cwd=ROOT,
                            env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 240
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith(f"FROZEN {KILL_POINT}") or time.monotonic() > deadline:
            break
    else:
        proc.wait()
        pytest.fail(f"the run ended before reaching {KILL_POINT} (exit {proc.returncode}): {''.join(seen[-20:])}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def test_a_night_killed_inside_the_aggregates_merge_and_run_again_ends_as_the_clean_night(nightly):
    pipeline = nightly["after_night_2"]
    versions_before = query(pipeline, 'SELECT COUNT(*) FROM "carrier_day"')[0][0]
    ingest(pipeline, NIGHTS)
    kill_mid_run(pipeline)
    # killed mid-run: clean and enrich committed, the aggregate's merge left nothing
    assert query(pipeline, "SELECT COUNT(*) FROM \"flights.enriched\" WHERE day = '2013-01-03'")[0][0] > 0
    assert query(pipeline, 'SELECT COUNT(*) FROM "carrier_day"')[0][0] == versions_before
    again = run(pipeline)
    assert again["clean"]["rows_in"] == 0 and again["carrier_day"]["rows_in"] > 0
    check_night(pipeline, NIGHTS)
    assert snapshot(pipeline) == nightly["final"]


def test_a_replay_of_the_aggregates_input_and_a_rerun_recompute_the_same_values_and_write_no_version(nightly):
    pipeline = nightly["pipeline"]
    before = snapshot(pipeline)
    out = invoke("replay", "flights.enriched", "--consumer", "carrier_day", "--pipeline", pipeline)
    assert out.exit_code == 0, out.output
    again = run(pipeline)
    assert again["carrier_day"]["rows_in"] == len(before["flights.enriched"])
    assert again["carrier_day"]["rows_out"] == 0  # every group recomputed, every value as stored
    after = snapshot(pipeline)
    assert after["carrier_day"] == before["carrier_day"]
    assert after["carrier_day:current"] == before["carrier_day:current"]
    check_night(pipeline, NIGHTS)

"""Benchmark a lookup on the warm engine: what a 1,000,000-row lookup adds to a night when unchanged.

Two pipelines on two ledgers holding the same rows: flights (facts) and a reference topic of
``--rows`` rows. ``with`` joins each night's new flights to the reference topic declared as a
lookup (the join the lookups page shows: a semi join of the lookup against the night's keys,
then a broadcast left join); ``without`` runs the same stage shape with no lookup (the same
select, no join). Every figure is the wall time of the real ``minikafka run --remote`` (a
stage client process of the warm engine), in this order:

1. night 1 of both (the engine started by ``run``; ``with`` reads the lookup over JDBC, writes
   its Parquet copy and keeps it in the engine's memory): for reference;
2. ``--nights`` further nights, each appending ``--facts`` new flights to both ledgers and
   running both pipelines alternately: the lookup unchanged since the last run, so ``with``
   finds it in the engine's memory. The figure: median(with) - median(without) <= 0.5 s, with
   the ratio of the two;
3. one night after a reference row was appended (the lookup changed: read again over JDBC),
   for reference.

Every night's run details must say where the lookup's rows came from, as expected
(``cached``: "memory", or False when read from the ledger). The engine is stopped at the end.
Exit status 1 when a target is missed.
Usage: python scripts/bench_lookup.py [--rows 1000000] [--facts 10000] [--nights 5]
"""

from __future__ import annotations

import argparse
import atexit
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_common import exit_code, scratch_dir

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.5

MODELS = '''
from pydantic import BaseModel


class Flight(BaseModel):
    flight_id: int
    carrier: str


class Carrier(BaseModel):
    carrier: str
    name: str
    country: str


class Enriched(BaseModel):
    flight_id: int
    carrier: str
    name: str | None = None
'''

WITH_JOB = '''
from pyspark.sql import functions as F


def transform(frames):
    # a night's few rows against a large lookup: the lookup rows whose key the night holds (a semi
    # join against the night's keys, broadcast: the lookup is scanned once, never shuffled), then
    # the night's rows joined to those few (broadcast; a left join keeps a flight with no carrier)
    flights, carriers = frames["flights"], frames["carriers"]
    wanted = carriers.select("carrier", "name").join(F.broadcast(flights.select("carrier")), "carrier", "left_semi")
    return (flights.join(F.broadcast(wanted), "carrier", "left")
            .select("_id", "flight_id", "carrier", "name"))

if __name__ == "__main__":
    from minikafka.job import main

    raise SystemExit(main())
'''

WITHOUT_JOB = '''
from pyspark.sql import functions as F


def transform(df):
    return df.select("_id", "flight_id", "carrier", F.lit(None).cast("string").alias("name"))

if __name__ == "__main__":
    from minikafka.job import main

    raise SystemExit(main())
'''

PIPELINE = '''
[pipeline]
name = "{name}"
source = "ledger.sqlite"
master = "local[2]"

[topics."flights"]
model = "benchlookup.models:Flight"
dedup = ["flight_id"]

[topics."carriers"]
model = "benchlookup.models:Carrier"
dedup = ["carrier"]

[topics."enriched"]
model = "benchlookup.models:Enriched"
dedup = ["flight_id"]

[[stages]]
name = "enrich"
job = "benchlookup.{job}"
inputs = ["flights"]
{lookups}outputs = ["enriched"]
'''


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def mk(home: Path, *args) -> float:
    """Run `minikafka ARGS` in ``home`` (its models importable); return its wall time in seconds."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{home}"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "minikafka.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=home, env=env)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"minikafka {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return seconds


def make_home(tmp: Path, name: str, lookup: bool) -> Path:
    home = tmp / name
    (home / "benchlookup").mkdir(parents=True)
    (home / "benchlookup" / "__init__.py").write_text("")
    (home / "benchlookup" / "models.py").write_text(MODELS)
    (home / "benchlookup" / "with_lookup.py").write_text(WITH_JOB)
    (home / "benchlookup" / "without_lookup.py").write_text(WITHOUT_JOB)
    (home / "pipeline.toml").write_text(PIPELINE.format(
        name=name, job="with_lookup" if lookup else "without_lookup",
        lookups='lookups = ["carriers"]\n' if lookup else ""))
    return home


def fill(home: Path, rows: int, first_flight: int, facts: int) -> None:
    """The reference rows (once, when ``rows``) and ``facts`` new flights, appended in bulk."""
    sys.path.insert(0, str(home))
    try:
        from benchlookup.models import Carrier, Enriched, Flight  # type: ignore[import-not-found]

        from minikafka import Source

        with Source(str(home / "ledger.sqlite")) as src:
            src.topic("enriched", Enriched, dedup="flight_id")
            if rows:
                carriers = src.topic("carriers", Carrier, dedup="carrier")
                for start in range(0, rows, 100_000):
                    carriers.extend([{"carrier": f"c{i}", "name": f"Carrier {i}", "country": "XX"}
                                     for i in range(start, min(rows, start + 100_000))])
            src.topic("flights", Flight, dedup="flight_id").extend(
                [{"flight_id": i, "carrier": f"c{(i * 7919) % max(rows, 1_000_000)}"}
                 for i in range(first_flight, first_flight + facts)])
    finally:
        sys.path.remove(str(home))
        for name in [m for m in sys.modules if m.startswith("benchlookup")]:
            del sys.modules[name]


def last_run(home: Path) -> dict:
    from minikafka import Source

    with Source(str(home / "ledger.sqlite")) as src:
        return src.runs(stage="enrich", limit=1)[0]


def lookup_note(run: dict) -> str:
    """Where a run read its lookup from, and how long making its frame took."""
    note = run["details"]["lookups"]["carriers"]
    return f"lookup from {note['cached'] or 'the ledger'}, {note['seconds']:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the lookup (default 1,000,000)")
    parser.add_argument("--facts", type=int, default=10_000, help="new flights per night (default 10,000)")
    parser.add_argument("--nights", type=int, default=5, help="measured nights with the lookup unchanged")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    tmp = scratch_dir("mk-bench-lookup-")
    with_home, without_home = make_home(tmp, "with", True), make_home(tmp, "without", False)
    t0 = time.perf_counter()
    for home in (with_home, without_home):
        fill(home, args.rows, 0, args.facts)
    print(f"setup: {args.rows:,} reference rows and {args.facts:,} flights in each ledger  "
          f"{time.perf_counter() - t0:6.1f} s")

    from minikafka.pipelines import load_pipeline
    from minikafka.pipelines.launch.engine import find_engine, stop_engine

    sys.path.insert(0, str(with_home))  # the models, for the pipeline file
    defn = load_pipeline(with_home / "pipeline.toml", check_jobs=False, suites=False)
    atexit.register(stop_engine, defn)
    cold = mk(with_home, "run", "pipeline.toml", "--engine", "auto", "--idle-timeout", "600")
    state = find_engine(defn)
    if state is None:
        raise SystemExit("the engine that run started is not running")
    url = state.url
    night1 = last_run(with_home)["details"]["lookups"]["carriers"]
    first_without = mk(without_home, "run", "pipeline.toml", "--remote", url)
    print(f"night 1, with the lookup (engine start, JDBC read, copy written) {cold:6.2f} s  "
          f"(lookup read {night1['seconds']:.2f} s, cached={night1['cached']})")
    print(f"night 1, without the lookup (warm engine)                      {first_without:6.2f} s")

    times: dict[str, list[float]] = {"with": [], "without": []}
    cached_ok = True
    next_flight = args.facts
    for night in range(args.nights):
        for home in (with_home, without_home):
            fill(home, 0, next_flight, args.facts)
        next_flight += args.facts
        times["with"].append(mk(with_home, "run", "pipeline.toml", "--remote", url))
        with_run = last_run(with_home)
        cached_ok &= with_run["details"]["lookups"]["carriers"]["cached"] == "memory"
        times["without"].append(mk(without_home, "run", "pipeline.toml", "--remote", url))
        print(f"  night {night + 2}: with {times['with'][-1]:.2f} s ({lookup_note(with_run)}), "
              f"without {times['without'][-1]:.2f} s")
    with_s, without_s = statistics.median(times["with"]), statistics.median(times["without"])
    added = with_s - without_s
    print(f"{args.nights} nights of {args.facts:,} new flights, lookup unchanged (medians): with {with_s:.2f} s, "
          f"without {without_s:.2f} s  ratio {with_s / without_s:.2f}x")
    print(f"  every night found the lookup in the engine's memory: {cached_ok}  {verdict(cached_ok)}")
    print(f"what an unchanged {args.rows:,}-row lookup adds to a night   {added:6.2f} s  "
          f"target <= {TARGET_S:.2f} s  {verdict(added <= TARGET_S)}")

    from benchlookup.models import Carrier  # type: ignore[import-not-found]

    from minikafka import Source

    with Source(str(with_home / "ledger.sqlite")) as src:
        src.topic("carriers", Carrier, dedup="carrier").append({"carrier": "new", "name": "New", "country": "XX"})
    fill(with_home, 0, next_flight, args.facts)
    changed = mk(with_home, "run", "pipeline.toml", "--remote", url)
    details = last_run(with_home)["details"]["lookups"]["carriers"]
    reread = details["cached"] is False
    print(f"a night after the lookup changed (read again over JDBC)   {changed:6.2f} s  "
          f"(lookup read {details['seconds']:.2f} s)  read again: {reread}  {verdict(reread)}")
    stop_engine(defn)


if __name__ == "__main__":
    sys.exit(exit_code(main))

"""Benchmark the small things a person waits for (issue 42, item 7), each the wall time of the
real `minikafka` command (a new process, as from a shell), on the example pipeline:

1. `status`, `topics` and `plot` given `--pipeline`: <= 0.5 s each (loading the pipeline file
   imported great-expectations and pyspark: about 3 s); beside them `status --source`, the
   simpler path, and the ratio;
2. `backfill` of a 16-row dump and of a 50,000-row dump into a fresh topic: <= 2 s each (no
   JVM: the Python engine; a JVM took 13-21 s for 16 rows);
3. `backfill` of the same dump again, nothing new: <= 1 s (7 s with a JVM);
4. one stage (keep_articles) over 10,000 new rows on the warm engine: <= 1.5 s (1.9-2.4 s).

Each CLI figure is the median of ``--repeat`` runs (default 3) after one unmeasured run, so
Python's bytecode cache is written as an installed package has it (a fresh checkout has none;
$PYTHONDONTWRITEBYTECODE is dropped for the commands). The engine that item 4 starts is stopped
at the end (and if the script is interrupted): no JVM outlives it. Exit status 1 when a target
is missed.
Usage: python scripts/bench_small.py [--repeat 3] [--no-engine]
"""

from __future__ import annotations

import argparse
import atexit
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench_common import exit_code, scratch_dir, timed_minikafka

ROOT = Path(__file__).resolve().parents[1]
SMALL_ROWS = 50_000


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "MINIKAFKA_SOURCE",
                                                            "MINIKAFKA_PIPELINE")}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


ENV = environment()


def mk(*args, check: bool = True) -> float:
    """Run `minikafka ARGS` as a new process; return its wall time in seconds."""
    return timed_minikafka(ROOT, ENV, *args, check=check)


def median_of(repeat: int, *args) -> float:
    mk(*args)  # unmeasured: bytecode written, files in the page cache
    return statistics.median(mk(*args) for _ in range(repeat))


def pipeline_copy(home: Path) -> Path:
    """conf/homelab.toml with its ledger in ``home`` (the suites and jobs of the checkout)."""
    home.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "conf" / "homelab.toml").read_text()
    text = text.replace('source = "../data/homelab.sqlite"', f'source = "{home / "homelab.sqlite"}"')
    text = text.replace('"quality/', f'"{ROOT / "conf" / "quality"}/')
    path = home / "homelab.toml"
    path.write_text(text)
    return path


def generate(out: Path, items: int, start: int = 0, lines: int | None = None) -> Path:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_demo_data.py"), "--items", str(items),
                    "--start", str(start), str(out)], check=True, capture_output=True)
    if lines is not None:  # exactly this many lines (the generator adds a few bad and duplicate ones)
        with open(out, "rb") as fh:
            head = [fh.readline() for _ in range(lines)]
        out.write_bytes(b"".join(head))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="measured runs per CLI figure (median)")
    parser.add_argument("--no-engine", action="store_true", help="skip the warm-engine stage (no JVM)")
    args = parser.parse_args()
    tmp = scratch_dir("mk-bench-small-")
    feed = generate(tmp / "feed.jsonl", 500)
    main_pipe = pipeline_copy(tmp / "main")
    mk("ingest", main_pipe, "rss.items", feed)
    ledger = main_pipe.parent / "homelab.sqlite"

    simple = median_of(args.repeat, "status", "--source", ledger)
    print(f"status --source (the simpler path, for reference)        {simple:6.2f} s")
    for command in ("status", "topics", "plot"):
        seconds = median_of(args.repeat, command, "--pipeline", main_pipe)
        print(f"{command + ' --pipeline':<24} {seconds:6.2f} s  {seconds / simple:4.2f}x status --source  "
              f"target <= 0.50 s  {verdict(seconds <= 0.5)}")

    small = generate(tmp / "small.jsonl", 16, start=2_000_000, lines=16)
    large = generate(tmp / "large.jsonl", SMALL_ROWS, start=3_000_000, lines=SMALL_ROWS)
    for label, dump in (("16-row dump", small), (f"{SMALL_ROWS:,}-row dump", large)):
        firsts, agains = [], []
        for i in range(args.repeat + 1):  # each load into a fresh ledger; the first unmeasured
            pipe = pipeline_copy(tmp / f"bf-{dump.stem}-{i}")
            first = mk("backfill", "--pipeline", pipe, "rss.items", dump, "-q")
            again = mk("backfill", "--pipeline", pipe, "rss.items", dump, "-q")
            if i:
                firsts.append(first)
                agains.append(again)
        first, again = statistics.median(firsts), statistics.median(agains)
        print(f"backfill, {label:<16} {first:6.2f} s  target <= 2.00 s  {verdict(first <= 2.0)}")
        print(f"backfill, {label}, nothing new  {again:6.2f} s  target <= 1.00 s  {verdict(again <= 1.0)}")

    if not args.no_engine:
        print(warm_stage(tmp, feed, args.repeat))


def warm_stage(tmp: Path, feed: Path, repeat: int) -> str:
    """keep_articles over 10,000 new rows on the warm engine, ``repeat`` times (fresh rows each)."""
    from minikafka.pipelines import load_pipeline
    from minikafka.pipelines.launch.engine import find_engine, stop_engine

    pipe = pipeline_copy(tmp / "engine")
    mk("ingest", pipe, "rss.items", feed)
    if str(ROOT) not in sys.path:  # the checkout's schemas/ and jobs/, as for the commands run from it
        sys.path.insert(0, str(ROOT))
    defn = load_pipeline(pipe, suites=False)
    atexit.register(stop_engine, defn)
    mk("run", pipe, "--engine", "auto", "--idle-timeout", "600")  # starts the engine (not measured)
    state = find_engine(defn)
    if state is None:
        raise SystemExit("the engine that run started is not running")
    mk("run", pipe, "--remote", state.url)  # warm: nothing new
    times = []
    for i in range(repeat + 1):  # the first, unmeasured: the stage's first run on this engine
        rows = generate(tmp / f"more-{i}.jsonl", 10_000, start=1_000_000 + 20_000 * i)
        mk("ingest", pipe, "rss.items", rows)
        seconds = mk("run", pipe, "--remote", state.url, "--stage", "keep_articles")
        if i:
            times.append(seconds)
    stop_engine(defn)
    best, middle = min(times), statistics.median(times)
    return (f"stage over 10,000 new rows, warm engine  {middle:6.2f} s (median; best {best:.2f} s)  "
            f"target <= 1.50 s  {verdict(middle <= 1.5)}")


if __name__ == "__main__":
    sys.exit(exit_code(main))

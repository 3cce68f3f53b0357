"""Benchmark the example pipeline: spark-submit per stage vs --in-process, same data.

Target: --in-process wall time at most 1/3 of per-stage.
Usage: python scripts/bench_pipeline.py [--items 5000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from bench_common import exit_code, scratch_dir

ROOT = Path(__file__).resolve().parents[1]


def mk(*args) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "minikafka.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"minikafka {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5000)
    args = parser.parse_args()
    tmp = scratch_dir("mk-bench-pipe-")
    dump = tmp / "dump.jsonl"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_demo_data.py"), "--items", str(args.items),
                    str(dump)], check=True, capture_output=True)
    text = (ROOT / "conf" / "homelab.toml").read_text()
    times = {}
    for mode in ("per-stage", "in-process"):
        home = tmp / mode
        home.mkdir()
        pipeline = home / "pipeline.toml"
        # the suites are named relative to conf/: point them there from the copy
        pipeline.write_text(text.replace('source = "../data/homelab.sqlite"', f'source = "{home / "homelab.sqlite"}"')
                            .replace('"quality/', f'"{ROOT / "conf" / "quality"}/'))
        ingested = mk("ingest", pipeline, "rss.items", dump).stdout.strip()
        t0 = time.perf_counter()
        run = mk("run", pipeline, *(["--in-process"] if mode == "in-process" else []))
        times[mode] = time.perf_counter() - t0
        print(f"{mode:11} {times[mode]:7.1f} s   ({ingested})")
        print("\n".join("    " + line for line in run.stdout.strip().splitlines()))
    ratio = times["in-process"] / times["per-stage"]
    print(f"in-process / per-stage = {ratio:.2f}  target <= 0.33  {'PASS' if ratio <= 1 / 3 else 'FAIL'}")


if __name__ == "__main__":
    sys.exit(exit_code(main))

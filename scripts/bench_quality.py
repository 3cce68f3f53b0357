"""Time the data-quality checks add to a stage of 100,000 and 1,000,000 rows (issue 5).

The same stage runs twice on identical ledgers: without suites, then with a 5-expectation
suite plus a row-count check (policy warn, and again with policy quarantine at the
larger size is left to the tests). Prints the added seconds and the checks' own timing.
Usage: python scripts/bench_quality.py [--sizes 100000 1000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import scratch_dir  # noqa: E402
from bench_spark import fill, make_topics, stage  # noqa: E402

from minikafka import Source  # noqa: E402

SUITE = """
policy = "warn"
[[expect]]
type = "expect_column_values_to_not_be_null"
column = "url"
[[expect]]
type = "expect_column_values_to_match_regex"
column = "url"
regex = "^https://"
[[expect]]
type = "expect_column_values_to_be_between"
column = "score"
min_value = 0
max_value = 10000000
[[expect]]
type = "expect_column_values_to_be_unique"
column = "url"
[[expect]]
type = "expect_column_values_to_not_be_null"
column = "score"
[row_count]
min_ratio = 1.0
max_ratio = 1.0
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    args = parser.parse_args()
    from minikafka.quality import load_suite
    from minikafka.spark import build_session, run_stage

    spark = build_session(master="local[2]")
    tmp = scratch_dir("mk-bench-q-")
    suite_path = tmp / "suite.toml"
    suite_path.write_text(SUITE)
    t0 = time.perf_counter()
    load_suite(suite_path, fields={"scored": ["url", "score"]}, topic="scored")
    print(f"great-expectations import + suite load (once per process): {time.perf_counter() - t0:.1f} s")
    warm = tmp / "warm.sqlite"
    with Source(str(warm)) as src:
        make_topics(src)
        fill(src, "items", 1, 1000, "new")
        s = stage()
        s.suites = [load_suite(suite_path, fields={"scored": ["url", "score"]}, topic="scored")]
        run_stage(spark, src, s)
    for n in args.sizes:
        times = {}
        for mode in ("plain", "checked"):
            path = tmp / f"{mode}-{n}.sqlite"
            with Source(str(path)) as src:
                make_topics(src)
                fill(src, "items", 1, n, "new")
                s = stage()
                if mode == "checked":
                    s.suites = [load_suite(suite_path, fields={"scored": ["url", "score"]}, topic="scored")]
                t = time.perf_counter()
                result = run_stage(spark, src, s)
                times[mode] = time.perf_counter() - t
                if mode == "checked":
                    checks = result.quality["seconds"]
                    ok = result.quality["suites"][0]["success"]
        print(f"{n:>9,} rows: stage {times['plain']:6.1f} s without checks, {times['checked']:6.1f} s with "
              f"(+{times['checked'] - times['plain']:.1f} s; the checks themselves {checks:.1f} s; suite passed: {ok})")


if __name__ == "__main__":
    main()

"""The JSONL chunk tasks: what they do to the worker process they run in."""

from __future__ import annotations


def test_a_validating_worker_yields_the_cpu_to_the_driver_on_a_local_master():
    import os
    import subprocess
    import sys

    code = ("import os; from minikafka.spark import jsonlparts as j; j._lower_priority(); j._lower_priority(); "
            "print(os.nice(0))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert int(out.stdout) == max(os.nice(0), 10)

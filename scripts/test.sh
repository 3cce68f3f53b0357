#!/usr/bin/env bash
# Set up (idempotently) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# two workers: every JVM test on one of them (one SparkSession, one engine), the rest beside it
exec .venv/bin/python -m pytest -q -n 2 --dist loadgroup "$@"

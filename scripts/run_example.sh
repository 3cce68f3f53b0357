#!/usr/bin/env bash
# The main job: set up (idempotently), then run the example pipeline on data/homelab.sqlite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python scripts/tour.py data/homelab.sqlite

#!/usr/bin/env bash
# The main job: set up (idempotently), make the demo RSS dump if missing, ingest it, and run
# the example pipeline (one spark-submit per stage) on data/homelab.sqlite.
# Running it again processes nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
[ -f data/rss_dump.jsonl ] || .venv/bin/python scripts/generate_demo_data.py --items 5000 data/rss_dump.jsonl
.venv/bin/minikafka ingest conf/homelab.toml rss.items data/rss_dump.jsonl
.venv/bin/minikafka run conf/homelab.toml "$@"
.venv/bin/minikafka plot conf/homelab.toml --counts

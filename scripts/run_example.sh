#!/usr/bin/env bash
# The main job: set up (idempotently), make the demo RSS dump if missing, ingest it, and run
# the example pipeline on data/homelab.sqlite, its stages on a warm engine that this run starts
# and stops at its end (--idle-timeout 0: no JVM outlives the script; docs/how-to/engines.md).
# Running it again processes nothing new (and starts no engine). Extra arguments go to
# `minikafka run` (e.g. --engine submit: one spark-submit per stage).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
[ -f data/rss_dump.jsonl ] || .venv/bin/python scripts/generate_demo_data.py --items 5000 data/rss_dump.jsonl
.venv/bin/minikafka ingest conf/homelab.toml rss.items data/rss_dump.jsonl
.venv/bin/minikafka run conf/homelab.toml --idle-timeout 0 "$@"
.venv/bin/minikafka plot conf/homelab.toml --counts

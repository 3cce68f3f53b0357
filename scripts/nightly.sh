#!/usr/bin/env bash
# This checkout's cron entry, kept for crontabs that name it: `minikafka nightly` (in the wheel,
# any project) does the work: ingest the topics' 'ingest' files, run, health, a log per night.
#   crontab:  15 2 * * *  /path/to/repo/scripts/nightly.sh conf/homelab.toml
# Logs and the lock go to the checkout's logs/. Extra arguments after the pipeline go to
# `minikafka run` (e.g. --strategy best_effort). MINIKAFKA_HEALTH_NOTIFY=URL: health POSTs
# there when a check's state changes.
# Exit code: 0 ok, 1 a stage or an ingest failed, 2 bad definition, 3 the run succeeded but a
# health check fails, 75 another run holds the lock.
set -uo pipefail
cd "$(dirname "$0")/.."
pipeline=${1:-conf/homelab.toml}
shift || true
exec .venv/bin/minikafka nightly "$pipeline" --log-dir logs ${MINIKAFKA_HEALTH_NOTIFY:+--notify "$MINIKAFKA_HEALTH_NOTIFY"} "$@"

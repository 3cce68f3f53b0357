#!/usr/bin/env bash
# Nightly cron entry: run the pipeline once, never two at a time, one log file per night,
# then `minikafka health` on the pipeline (its lines go into the log).
#   crontab:  15 2 * * *  /path/to/repo/scripts/nightly.sh conf/homelab.toml
# Exit code: 0 ok, 1 a stage failed, 2 bad definition, 3 the run succeeded but a health
# check fails, 75 another run holds the lock.
# Extra arguments after the pipeline go to `minikafka run` (e.g. --strategy best_effort).
# MINIKAFKA_HEALTH_NOTIFY=URL: health POSTs there when a check's state changes.
set -uo pipefail
cd "$(dirname "$0")/.."
pipeline=${1:-conf/homelab.toml}
shift || true
mkdir -p logs
log="logs/nightly-$(date -u +%Y-%m-%d).log"
lock="logs/.nightly.lock"
exec 9>"$lock"
if ! flock -n 9; then
  echo "$(date -u +%FT%TZ) another nightly run holds $lock; not starting" | tee -a "$log" >&2
  exit 75
fi
{
  echo "=== $(date -u +%FT%TZ) minikafka run $pipeline $*"
  [ -n "${MINIKAFKA_NIGHTLY_INGEST:-}" ] && .venv/bin/minikafka ingest "$pipeline" rss.items "$MINIKAFKA_NIGHTLY_INGEST"
  .venv/bin/minikafka run "$pipeline" "$@"
  status=$?
  if [ "$status" -ne 2 ]; then
    echo "=== $(date -u +%FT%TZ) minikafka health --pipeline $pipeline"
    .venv/bin/minikafka health --pipeline "$pipeline" ${MINIKAFKA_HEALTH_NOTIFY:+--notify "$MINIKAFKA_HEALTH_NOTIFY"}
    health=$?
    if [ "$status" -eq 0 ] && [ "$health" -ne 0 ]; then status=3; fi
  fi
  echo "=== $(date -u +%FT%TZ) exit $status"
  exit $status
} >>"$log" 2>&1

#!/usr/bin/env bash
# Run every scripts/bench_*.py (each under the shared Spark lock) and print one table:
# figure, target, PASS/FAIL. Exit 1 when any benchmark missed a target or crashed.
# Usage: scripts/bench.sh [bench_name ...]   (default: all; e.g. scripts/bench.sh staging backfill)
# PYTHON=... picks the interpreter (default .venv/bin/python).
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
LOCK="${MINIKAFKA_SPARK_LOCK:-/tmp/minikafka-spark.lock}"
# BENCH_LOCK_HELD=1: the caller already holds the lock (flock LOCK scripts/bench.sh ...)
if [ "${BENCH_LOCK_HELD:-0}" = 1 ]; then locked() { "$@"; }; else locked() { flock "$LOCK" "$@"; }; fi
OUT="$(mktemp -d)"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$ROOT"/scripts/bench_*.py; do
    n="$(basename "$f" .py)"; [ "$n" = bench_common ] || names+=("${n#bench_}")
  done
fi
status=0
for n in "${names[@]}"; do
  echo "== bench_$n" >&2
  ( cd "$ROOT" && PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" locked "$PY" "scripts/bench_$n.py" ) \
    > "$OUT/$n.log" 2>&1
  rc=$?
  cat "$OUT/$n.log" >&2
  echo "$rc" > "$OUT/$n.rc"
  [ "$rc" -eq 0 ] || status=1
done
echo
echo "minikafka benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
printf '%-10s | %-100s | %-24s | %s\n' bench figure target result
printf '%s\n' "$(printf '%.0s-' {1..150})"
for n in "${names[@]}"; do
  found=0
  while IFS= read -r line; do
    case "$line" in
      *PASS|*FAIL)
        result="${line##* }"
        target="$(printf '%s' "$line" | grep -o 'target [^)]*' | sed 's/ *\(PASS\|FAIL\)$//' | head -1)"
        figure="$(printf '%s' "$line" | sed 's/ *target .*//' | tr -s ' ')"
        printf '%-10s | %-100.100s | %-24s | %s\n' "$n" "$figure" "${target#target }" "$result"
        found=1;;
    esac
  done < "$OUT/$n.log"
  rc="$(cat "$OUT/$n.rc")"
  if [ "$found" -eq 0 ] || [ "$rc" -ne 0 ] && ! grep -q 'FAIL$' "$OUT/$n.log"; then
    printf '%-10s | %-100s | %-24s | %s\n' "$n" "(no target figures; exit $rc)" "-" "$([ "$rc" -eq 0 ] && echo ok || echo CRASH)"
  fi
done
rm -rf "$OUT"
exit $status

#!/usr/bin/env bash
# Install what minikafka needs on a fresh Debian machine, idempotently:
#   Java 17 and Debian's SQLite JDBC driver (apt-get, only when missing),
#   Debian's mosquitto (the MQTT tests' broker) and graphviz (dot draws 'minikafka plot -o x.svg'),
#   Debian's chromium and chromium-driver (the web console's browser tests; no browser download),
#   Debian's prometheus (its promtool checks docs/metrics/ alert rules and our exposition),
#   a virtualenv in .venv with the package (distribution minikafka-spark, import name minikafka)
#   and its dev extras (which include lake: pyiceberg, deltalake, and DuckDB with its extension
#   wheels for the tests) at the versions in constraints.txt (only when pyproject.toml or
#   constraints.txt changed).
# Usage: scripts/setup.sh            (run as root, or with sudo available)
# Without root, for the library alone: python3 -m venv .venv && .venv/bin/pip install -c constraints.txt .
# (add extras as needed: ".[spark]", ".[all]"; the Spark ones also need Java 17 and the JDBC jar).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
if ! command -v java >/dev/null 2>&1 || ! java -version 2>&1 | grep -q 'version "17'; then
  need_apt+=(openjdk-17-jre-headless)
fi
if [ ! -e /usr/share/java/sqlite-jdbc.jar ]; then
  need_apt+=(libxerial-sqlite-jdbc-java)
fi
# the MQTT tests run a real broker on 127.0.0.1
if [ ! -x /usr/sbin/mosquitto ] && ! command -v mosquitto >/dev/null 2>&1; then
  need_apt+=(mosquitto)
fi
# 'minikafka plot --output pipeline.svg' draws the DAG with Graphviz's dot
if ! command -v dot >/dev/null 2>&1; then
  need_apt+=(graphviz)
fi
# the console's browser tests (tests/console) drive Debian's Chromium through its chromedriver
if [ ! -x /usr/bin/chromium ]; then
  need_apt+=(chromium)
fi
if [ ! -x /usr/bin/chromedriver ]; then
  need_apt+=(chromium-driver)
fi
# tests/observe check the alert rules (docs/metrics/) and 'minikafka metrics' output with promtool
if ! command -v promtool >/dev/null 2>&1; then
  need_apt+=(prometheus)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${need_apt[*]} with apt-get"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PY"
  "$PY" -m venv .venv
fi
stamp=.venv/.minikafka-installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python packages into .venv"
  log=.venv/pip-install.log
  # koaning's minikafka (or this project under its old distribution name) owns the same
  # import name: the two cannot be installed side by side
  if .venv/bin/python -m pip show minikafka >/dev/null 2>&1; then
    .venv/bin/python -m pip uninstall -y minikafka >"$log" 2>&1
  fi
  if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -c constraints.txt -e ".[dev]"; } >>"$log" 2>&1; then
    tail -n 40 "$log"; echo "setup: pip install failed (full log: $log)" >&2; exit 1
  fi
  echo "$want" > "$stamp"
fi

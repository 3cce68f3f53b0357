#!/usr/bin/env bash
# Regenerate the web console's screenshots in docs/how-to/img/ (docs/how-to/console.md shows them):
# the browser tests (tests/console/test_console_browser.py) take them while they click through
# the example pipeline's ledger after a real run. Needs what scripts/setup.sh installs.
# Usage: bash scripts/console_screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
MINIKAFKA_CONSOLE_SHOTS=docs/how-to/img exec .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/console/test_console_browser.py "$@"

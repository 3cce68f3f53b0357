"""The ledger owns its tables: no module outside ``minikafka/ledger/`` names a ``_minikafka_`` table.

Every statement on the ledger's own tables (catalog, acks, runs, quarantine, queues,
notifications, windows, loads, in-flight deliveries, ...) lives in a ``ledger/`` module, one
per table family, and DDL in ``ledger/schema.py``; the layers above call those functions.
The check is on the text, docstrings included, so a table name cannot creep back in prose
that later turns into SQL.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "minikafka"
LEDGER = PACKAGE / "ledger"
PREFIX = "_minikafka" + "_"  # written in two parts so this file does not name a table either


def test_no_module_outside_the_ledger_names_a_ledger_table():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if LEDGER in path.parents:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PREFIX in line:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert not found, "ledger tables named outside minikafka/ledger/ (move the SQL into a ledger module):\n" + \
        "\n".join(found)

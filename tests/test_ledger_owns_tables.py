"""The ledger owns its tables: no module outside ``minikafka/ledger/`` names a ``_minikafka_``
table, and none runs a statement at all.

Every statement on the ledger's own tables (catalog, acks, runs, quarantine, queues,
notifications, windows, loads, in-flight deliveries, ...) lives in a ``ledger/`` module, one
per table family, and DDL in ``ledger/transactions/schema.py``; every statement on a topic's rows lives
in ``ledger/topics/table.py`` (``TopicTable``). The layers above call those functions. The table
name check is on the text, docstrings included, so a table name cannot creep back in prose
that later turns into SQL; the statement check is on the code (calls of ``.execute`` and
``.executemany``), so prose may still show a user how to run SQL.
"""

from __future__ import annotations

import ast
import re
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


# The user's own SQL in a transaction (``tx.execute``/``tx.query``): run under an authorizer
# that keeps it off the ledger's tables, the one statement the ledger does not write.
USERS_SQL = {"minikafka/api/core/transaction.py"}
# Modules that still run statements outside the ledger, with how many: each entry is work
# left to move into ``ledger/``; the list may only shrink.
NOT_YET: dict[str, int] = {}


def statements_outside_the_ledger() -> dict[str, list[int]]:
    """{module: lines of its ``.execute(``/``.executemany(`` calls} for modules outside ``ledger/``."""
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if LEDGER in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("execute", "executemany")):
                found.setdefault(str(path.relative_to(PACKAGE.parent)), []).append(node.lineno)
    return found


def test_no_module_outside_the_ledger_runs_a_statement_but_the_users_own_sql():
    found = statements_outside_the_ledger()
    wrong = [f"{module}:{line}" for module, lines in sorted(found.items())
             if module not in USERS_SQL and len(lines) > NOT_YET.get(module, 0) for line in lines]
    assert not wrong, "statements run outside minikafka/ledger/ (move them into a ledger module; a topic's " \
        "rows: ledger/topics/table.py):\n" + "\n".join(wrong)


def test_the_list_of_modules_not_yet_moved_only_shrinks():
    found = statements_outside_the_ledger()
    stale = {module: n for module, n in NOT_YET.items() if len(found.get(module, [])) < n}
    assert not stale, f"fewer statements than NOT_YET allows: lower or drop these entries: {stale}"


# -- SQL text --------------------------------------------------------------------------------
# A condition, a select column or a whole statement on the ledger's rows is composed in
# ``ledger/`` too (``ledger.consuming.read_models``: a row filter is an object, never text), so
# the layers above pass objects, not SQL. Outside the ledger, SQL-looking text may stand only in
# docstrings and help texts, and in these modules, each for its reason:
NOT_THE_LEDGERS_SQL = {
    "minikafka/pipelines/launch/engine.py": "a Spark SQL warm-up query over a range, no ledger table",
}
# Modules that still compose SQL text on the ledger's rows, with how many strings: work left to
# move into ``ledger/``; the list may only shrink.
SQL_TEXT_NOT_YET: dict[str, int] = {}
# (not PRAGMA: messages name ``PRAGMA quick_check``; a PRAGMA run outside the ledger is a statement
# the test above finds)
SQL_WORDS = re.compile(r"\b(SELECT|FROM|WHERE|AND|OR|NOT|CASE WHEN|THEN|ORDER BY|GROUP BY|LIMIT|OFFSET|JOIN|"
                       r"INSERT|UPDATE|DELETE)\b")


def sql_text_outside_the_ledger() -> dict[str, list[int]]:
    """{module: lines of string constants (f-string parts included) holding SQL words in capitals}
    outside ``ledger/``, docstrings and ``help=`` texts left out."""
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if LEDGER in path.parents:
            continue
        tree = ast.parse(path.read_text())
        prose = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body \
                    and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
                prose.add(id(node.body[0].value))
            if isinstance(node, ast.keyword) and node.arg == "help":
                prose.update(id(n) for n in ast.walk(node.value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose \
                    and SQL_WORDS.search(node.value):
                found.setdefault(str(path.relative_to(PACKAGE.parent)), []).append(node.lineno)
    return found


def test_no_module_outside_the_ledger_composes_sql_text():
    found = sql_text_outside_the_ledger()
    wrong = [f"{module}:{line}" for module, lines in sorted(found.items())
             if module not in NOT_THE_LEDGERS_SQL and len(lines) > SQL_TEXT_NOT_YET.get(module, 0) for line in lines]
    assert not wrong, "SQL text composed outside minikafka/ledger/ (build it in a ledger module, e.g. " \
        "ledger/consuming/read_models.py, and pass an object):\n" + "\n".join(wrong)


def test_the_list_of_modules_still_composing_sql_text_only_shrinks():
    found = sql_text_outside_the_ledger()
    stale = {module: n for module, n in SQL_TEXT_NOT_YET.items() if len(found.get(module, [])) < n}
    assert not stale, f"fewer SQL strings than SQL_TEXT_NOT_YET allows: lower or drop these entries: {stale}"

"""'strict' and 'best_effort' are spelled once (util/strategy.py): pipes, stages, the pipeline
file's schema, run options and the command line take them from there."""

from __future__ import annotations

import ast
from pathlib import Path

from minikafka.util.strategy import STRATEGIES, strategy_problem

PACKAGE = Path(__file__).resolve().parents[2] / "minikafka"


def test_no_module_but_util_strategy_lists_the_strategies():
    lists = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "util" / "strategy.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Subscript)):
                names = {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)}
                if set(STRATEGIES) <= names:
                    lists.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not lists, lists


def test_a_strategy_no_run_takes_is_named_in_one_line():
    assert strategy_problem("strict") is None and strategy_problem("best_effort") is None
    assert strategy_problem("sometimes") == "strategy must be 'strict' or 'best_effort', got 'sometimes'"

"""The code blocks of docs/concepts/reading-the-ledger-with-sql.md, for the tests that run them."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "reading-the-ledger-with-sql.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)


def blocks(language: str) -> list[str]:
    """Every fenced block of that language, in page order."""
    return [body for lang, body in _BLOCK.findall(DOC.read_text()) if lang == language]


def query(title: str) -> str:
    """The SQL block whose first line is ``-- <title>``."""
    found = [b for b in blocks("sql") if b.splitlines()[0] == f"-- {title}"]
    assert len(found) == 1, f"no single SQL block titled {title!r} in {DOC.name}"
    return found[0]


def queries() -> dict[str, str]:
    """{title: SQL} of every SQL block (each starts with a ``-- title`` line)."""
    return {b.splitlines()[0].removeprefix("-- "): b for b in blocks("sql")}

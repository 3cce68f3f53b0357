"""The code layout page is generated from the code: every folder and module of the package is
named there with the first paragraph of its docstring, and the README links to it instead of
keeping a copy that falls behind."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "minikafka"


def generated_layout() -> str:
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import reference
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    page = (ROOT / "docs" / "reference" / "layout.md").read_text(encoding="utf-8")
    assert "<!-- generated: layout -->" in page
    return reference.render(page)


def test_every_module_of_the_package_is_named_on_the_layout_page_with_what_it_holds():
    text = generated_layout()
    for path in sorted(PACKAGE.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc, f"{path.relative_to(ROOT)} has no docstring to describe it"
        first = " ".join(doc.split("\n\n")[0].split())
        if path.name == "__init__.py" and path.parent != PACKAGE:  # a folder: its docstring heads its table
            assert f"### `{path.parent.relative_to(ROOT).as_posix()}/`\n\n{first}" in text.replace("\\|", "|")
        else:
            assert f"| `{path.relative_to(ROOT).as_posix()}` | {first} |" in text.replace("\\|", "|"), path


def test_the_readme_links_to_the_layout_page_instead_of_listing_the_modules():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/reference/layout.md)" in readme
    assert "`minikafka/ledger/`:" not in readme and "`minikafka/spark/`:" not in readme

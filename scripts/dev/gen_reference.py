"""Regenerate the reference pages' generated blocks from the code (the CLI, the file formats, the API).

The pages under ``docs/`` hold ``<!-- generated: NAME -->`` ... ``<!-- end of generated: NAME -->``
blocks whose text ``docs/hooks/reference.py`` makes from the code; the text is committed, so a
page reads on the forge as on the site, and ``mkdocs build`` imports nothing.
``tests/docs/test_reference_pages.py`` fails when a committed block differs from the code.

Run from anywhere: ``python scripts/dev/gen_reference.py`` (rewrites the stale pages and names
them); ``--check``: change nothing, exit 1 when a page is stale. The checkout's own ``minikafka``
is imported (this checkout first on the path), whatever is installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_generators():
    """``docs/hooks/reference.py`` as a module, with this checkout first on the import path."""
    if sys.path[:1] != [str(ROOT)]:
        sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location("minikafka_docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a page is stale")
    args = parser.parse_args(argv)
    reference = load_generators()
    if args.check:
        stale = reference.stale_pages(ROOT)
        for page in stale:
            print(f"stale: {page.relative_to(ROOT)}")
        if stale:
            print(f"regenerate with: {reference.REGENERATE}")
        return 1 if stale else 0
    changed = reference.write_pages(ROOT)
    for page in changed:
        print(f"regenerated {page.relative_to(ROOT)}")
    print(f"{len(changed)} page(s) regenerated, {len(reference.pages(ROOT)) - len(changed)} already current")
    return 0


if __name__ == "__main__":
    sys.exit(main())

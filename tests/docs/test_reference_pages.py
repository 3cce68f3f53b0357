"""The reference pages hold their generated text in the repository, and it is the code's.

``docs/reference/*.md`` used to hold only ``<!-- generated: ... -->`` markers filled at build time:
unreadable on the forge, and ``mkdocs build`` from a copy failed without ``PYTHONPATH=.``. The
text is committed now (``python scripts/dev/gen_reference.py``); these tests fail when a page
falls behind the code, naming the command that regenerates it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "dev"))
try:
    from gen_reference import load_generators
finally:
    sys.path.remove(str(ROOT / "scripts" / "dev"))

REFERENCE = load_generators()
READ_ON_THE_FORGE = ["cli", "pipeline-file", "quality-suite", "python-api", "errors", "deliveries-file", "layout"]


def test_every_generated_reference_page_is_committed_current_with_the_code():
    stale = [str(p.relative_to(ROOT)) for p in REFERENCE.stale_pages(ROOT)]
    assert not stale, f"stale generated text in {', '.join(stale)}: regenerate with `{REFERENCE.REGENERATE}`"


def test_the_reference_pages_hold_their_text_not_only_markers():
    for name in READ_ON_THE_FORGE:
        page = (ROOT / "docs" / "reference" / f"{name}.md").read_text(encoding="utf-8")
        assert f"<!-- end of generated: {name} -->" in page, f"{name}.md: regenerate with `{REFERENCE.REGENERATE}`"
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    from minikafka.cli import main

    assert all(f"## minikafka {name} " in cli for name in main.commands)
    pipeline = (ROOT / "docs" / "reference" / "pipeline-file.md").read_text(encoding="utf-8")
    from minikafka.pipelines.schema import StageSpec, TopicSpec

    assert all(f"`{key}`" in pipeline for key in [*StageSpec.model_fields, *TopicSpec.model_fields])
    api = (ROOT / "docs" / "reference" / "python-api.md").read_text(encoding="utf-8")
    assert "class Source(" in api and "#### Topic.append { #minikafka.Topic.append }" in api
    assert ":::" not in api


def test_gen_reference_check_exits_1_on_a_stale_page_and_names_the_command(tmp_path):
    copy = tmp_path / "checkout"
    (copy / "docs" / "reference").mkdir(parents=True)
    page = copy / "docs" / "reference" / "quality-suite.md"
    page.write_text("# Quality suite file\n\n<!-- generated: quality-suite -->\n", encoding="utf-8")
    assert [p.name for p in REFERENCE.stale_pages(copy)] == ["quality-suite.md"]
    assert [p.name for p in REFERENCE.write_pages(copy)] == ["quality-suite.md"]
    assert REFERENCE.stale_pages(copy) == [] and REFERENCE.write_pages(copy) == []
    text = page.read_text(encoding="utf-8")
    assert "[[expect]]" in text and text.rstrip().endswith("<!-- end of generated: quality-suite -->")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev" / "gen_reference.py"), "--check"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # this checkout's pages are current

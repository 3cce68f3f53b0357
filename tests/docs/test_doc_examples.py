"""Every code block of the README and the docs runs as written (see tests/docs/runner.py for the rules).

Each page is one test: its blocks run in order in scratch directories holding the shipped
conf/, schemas/, jobs/ and examples/. Pages with a Spark block carry the ``spark`` marker and
reuse the shared SparkSession.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .runner import ROOT, RUNNABLE, blocks_of, run_page

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _params():
    out = []
    for page in PAGES:
        blocks = [b for b in blocks_of(page) if b.runs]
        if not blocks:
            continue
        marks = [pytest.mark.spark] if any(b.spark for b in blocks) else []
        out.append(pytest.param(page, id=_rel(page), marks=marks))
    return out


@pytest.mark.parametrize("page", _params())
def test_every_block_of_the_page_runs_as_written(page, tmp_path, request):
    with_spark = "spark" in request.node.keywords
    if with_spark:
        request.getfixturevalue("spark")  # the shared session: the page's build_session() reuses it
    ran = run_page(page, tmp_path, with_spark=with_spark)
    assert ran > 0


def test_every_code_block_in_the_docs_is_run_or_skipped_with_a_reason():
    unrun = []
    for page in PAGES:
        for block in blocks_of(page):
            if block.lang in RUNNABLE and "skip" in block.directives and not block.directives["skip"]:
                unrun.append(f"{block.where}: skip without a reason")
    assert not unrun, "\n".join(unrun)


def test_nothing_the_docs_save_lands_in_conf_where_the_suite_loads_every_file():
    saved = [(b.where, b.directives["save"]) for page in PAGES for b in blocks_of(page) if "save" in b.directives]
    inside_conf = [f"{where}: {path}" for where, path in saved if Path(path).parts[:1] == ("conf",)]
    assert not inside_conf, "\n".join(inside_conf)


def test_the_docs_name_no_issue_numbers_and_no_files_outside_the_repository():
    import re

    bad = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for pattern in (r"\b[Ii]ssue \d+", r"DESIGN section", r"/work/", r"shared/seeds"):
            for m in re.finditer(pattern, text):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{_rel(page)}:{line}: {m.group(0)}")
    assert not bad, "\n".join(bad)

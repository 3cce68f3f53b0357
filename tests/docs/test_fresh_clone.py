"""The pages a newcomer reads first run as written in a fresh ``git clone`` of the repository.

tests/docs/test_doc_examples.py runs every page in a scratch directory the runner prepares;
this runs the README's and docs/getting-started/'s blocks where a reader runs them: in a new
clone of the committed HEAD (no ``data/``, no build output, nothing the runner made), each
block exactly as the page shows it. Without Spark, the blocks that need it are left out (with
the blocks that continue them); the ``spark`` tests run those too, one JVM per command.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from .runner import ROOT, blocks_of, run_page

FIRST_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "getting-started").glob("*.md"))]
# uses nothing of the checkout: tests/packaging/test_own_project.py runs it from an empty directory
# with the installed wheel (and tests/docs/test_doc_examples.py as every page), not a third time here
FROM_AN_EMPTY_DIRECTORY = {ROOT / "docs" / "getting-started" / "your-own-project.md"}


def _git_clone(into: Path) -> Path:
    """A fresh clone of the committed HEAD of this checkout."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    target = into / "minikafka-spark"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(target)], check=True,
                   capture_output=True, timeout=120)
    return target


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_readmes_first_pipeline_command_runs_in_a_fresh_clone(tmp_path):
    clone = _git_clone(tmp_path)
    assert not (clone / "data").exists(), "a fresh clone has no data/ (it is ignored)"
    block = next(b for b in blocks_of(ROOT / "README.md") if "minikafka ingest conf/homelab.toml" in b.text)
    command = next(line for line in block.text.splitlines() if line.startswith("minikafka ingest"))
    from .runner import Session

    session = Session(tmp_path, checkout=lambda _: clone)
    session._shell(block, command + "\n", expected_exit=0)
    assert (clone / "data" / "homelab.sqlite").is_file(), session.last_output


@pytest.mark.parametrize("page", FIRST_PAGES, ids=_id)
def test_every_block_of_the_first_pages_runs_as_written_in_a_fresh_clone(page, tmp_path):
    run_page(page, tmp_path, with_spark=False, leave_out_spark=True, checkout=_git_clone)


@pytest.mark.spark
@pytest.mark.parametrize("page", [p for p in FIRST_PAGES if p not in FROM_AN_EMPTY_DIRECTORY
                                  and any(b.spark and b.runs for b in blocks_of(p))], ids=_id)
def test_every_block_of_the_first_pages_runs_as_written_in_a_fresh_clone_with_spark(page, tmp_path, request):
    request.getfixturevalue("spark")  # the page's Python blocks reuse the shared session
    assert run_page(page, tmp_path, with_spark=True, checkout=_git_clone) > 0

"""The documentation site builds with ``mkdocs build --strict``: no warning, every generated page filled.

It builds as the docs say, from a copy: ``mkdocs build --strict`` in a directory holding only
``mkdocs.yml`` and ``docs/``, with no PYTHONPATH (the reference pages' text is committed; the
hook imports nothing of the project).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("mkdocs", reason="the docs extra is not installed")
pytest.importorskip("material", reason="the docs extra (mkdocs-material) is not installed")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    copy = tmp_path_factory.mktemp("copy")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", copy / "docs")
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    mkdocs = Path(sys.executable).parent / "mkdocs"  # the command the docs give, from the environment's bin/
    proc = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(out)], cwd=copy,
                          env={**env, "NO_MKDOCS_2_WARNING": "1"}, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=300)
    return proc, out


def test_the_docs_build_strict_without_warnings(site):
    proc, _ = site
    assert proc.returncode == 0, proc.stdout
    warnings = [line for line in proc.stdout.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, "\n".join(warnings)


def test_every_command_is_in_the_generated_cli_reference(site):
    from minikafka.cli import main

    _, out = site
    page = (out / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    missing = [name for name in main.commands if f'id="minikafka-{name}"' not in page]
    assert not missing, f"commands missing from the CLI reference: {missing}"


def test_the_generated_reference_pages_hold_what_the_code_declares(site):
    from minikafka.pipelines.schema import StageSpec

    _, out = site
    pipeline = (out / "reference" / "pipeline-file" / "index.html").read_text(encoding="utf-8")
    assert all(f"<code>{key}</code>" in pipeline for key in StageSpec.model_fields)
    for page in ("deliveries-file", "quality-suite", "errors", "python-api"):
        html = (out / "reference" / page / "index.html").read_text(encoding="utf-8")
        assert "generated:" not in html, f"{page}: a marker was left unfilled"
    api = (out / "reference" / "python-api" / "index.html").read_text(encoding="utf-8")
    for name in ("Source", "Topic", "Queue", "ConsumerGroup", "build_session"):
        assert f'id="minikafka.{name}"' in api or f'id="minikafka.spark.{name}"' in api, name

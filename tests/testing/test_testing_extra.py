"""A project's own tests need the ``testing`` extra only: pytest runs the plugin's fixtures and
chispa compares the frames (``assert_output_equals``); a project installed with ``spark`` and
``quality`` alone is told in one line what to install. No JVM."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from minikafka.errors import MissingDependencyError

ROOT = Path(__file__).resolve().parents[2]
HOMELAB = ROOT / "conf" / "homelab.toml"


def test_comparing_a_stages_outputs_without_chispa_names_the_testing_extra(minikafka_pipeline, monkeypatch):
    harness = minikafka_pipeline(HOMELAB)
    monkeypatch.setitem(sys.modules, "chispa", None)  # not installed
    with pytest.raises(MissingDependencyError) as raised:
        harness.assert_output_equals("rss.youtube", [])
    assert str(raised.value) == "chispa is not installed: pip install 'minikafka-spark[testing]'"


def test_the_testing_extra_installs_pytest_and_chispa():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~\[ ]", req, maxsplit=1)[0] for req in project["optional-dependencies"]["testing"]}
    assert names == {"pytest", "chispa"}

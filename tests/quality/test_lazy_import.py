"""great-expectations is imported only when a pipeline has suites."""

from __future__ import annotations

import subprocess
import sys

from tests.pipelines.helpers import ROOT, homelab_copy

CODE = """
import sys
from minikafka.pipelines import load_pipeline
defn = load_pipeline(sys.argv[1])
print('great_expectations' in sys.modules, sum(len(s.suites) for s in defn.stages))
"""


def run(path) -> str:
    return subprocess.run([sys.executable, "-c", CODE, str(path)], capture_output=True, text=True, cwd=ROOT,
                          check=True).stdout.strip()


def test_no_suites_no_import(tmp_path):
    plain = homelab_copy(tmp_path)
    text = plain.read_text()
    plain.write_text("\n".join(line for line in text.splitlines() if not line.startswith("expectations")))
    assert run(plain) == "False 0"


def test_suites_import_it(tmp_path):
    assert run(homelab_copy(tmp_path)) == "True 4"

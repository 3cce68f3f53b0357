"""great-expectations is imported only when a pipeline's suites are made ready to run."""

from __future__ import annotations

import subprocess
import sys

from tests.pipelines.helpers import ROOT, homelab_copy

CODE = """
import sys
from minikafka.pipelines import load_pipeline
defn = load_pipeline(sys.argv[1])
loaded = 'great_expectations' in sys.modules
defn.load_suites()
print(loaded, 'great_expectations' in sys.modules, sum(len(s.suites) for s in defn.stages))
"""


def run(path) -> str:
    return subprocess.run([sys.executable, "-c", CODE, str(path)], capture_output=True, text=True, cwd=ROOT,
                          check=True).stdout.strip()


def test_no_suites_no_import(tmp_path):
    plain = homelab_copy(tmp_path)
    text = plain.read_text()
    plain.write_text("\n".join(line for line in text.splitlines() if not line.startswith("expectations")))
    assert run(plain) == "False False 0"


def test_suites_import_it_only_when_made_ready_to_run(tmp_path):
    assert run(homelab_copy(tmp_path)) == "False True 4"

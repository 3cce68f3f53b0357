"""Commands that only show a pipeline (status, topics, plot with --pipeline) import neither
great-expectations nor pyspark: loading the pipeline file read them (about 3 s) before."""

from __future__ import annotations

import subprocess
import sys

from minikafka.pipelines import load_pipeline
from tests.cli.helpers import invoke
from tests.pipelines.helpers import ROOT, homelab_copy

CLI = """
import sys
from minikafka.cli import main
try:
    main(sys.argv[1:], prog_name="minikafka")
except SystemExit as exc:
    code = exc.code
print("imported:", sorted(m for m in ("great_expectations", "pyspark") if m in sys.modules), "exit:", code)
"""

LOAD = """
import sys
from minikafka.pipelines import load_pipeline
defn = load_pipeline(sys.argv[1])
print("imported:", sorted(m for m in ("great_expectations",) if m in sys.modules),
      "suites:", sum(len(s.suites) for s in defn.stages))
"""


def _python(code: str, *args) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_loading_a_pipeline_with_suites_does_not_import_great_expectations(tmp_path):
    assert _python(LOAD, homelab_copy(tmp_path)) == "imported: [] suites: 4"


def test_status_topics_and_plot_with_pipeline_import_neither_great_expectations_nor_pyspark(tmp_path):
    pipeline = homelab_copy(tmp_path)
    assert invoke("ingest", pipeline, "rss.items", ROOT / "examples" / "feed.jsonl").exit_code == 0
    for command in ("status", "topics", "plot"):
        assert _python(CLI, command, "--pipeline", pipeline) == "imported: [] exit: 0", command


def test_status_with_pipeline_still_refuses_a_suite_of_an_unknown_expectation_type(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('topic = "rss.youtube"\n[[expect]]\ntype = "expect_the_moon"\ncolumn = "url"\n')
    pipeline = homelab_copy(tmp_path, replace={'expectations = ["quality/youtube.toml"]': f'expectations = ["{bad}"]'})
    result = invoke("status", "--pipeline", pipeline)
    assert result.exit_code == 2
    assert f"{bad}: expectation #1: unknown expectation type 'expect_the_moon'" in result.output
    assert _python(CLI, "status", "--pipeline", pipeline) == "imported: [] exit: 2"


def test_invalid_suite_arguments_keep_their_error_where_the_suite_is_made_ready(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('topic = "rss.youtube"\n[[expect]]\ntype = "expect_column_values_to_be_between"\n'
                   'column = "url"\nmin_value = "x"\nmax_valu = 3\n')
    pipeline = homelab_copy(tmp_path, replace={'expectations = ["quality/youtube.toml"]': f'expectations = ["{bad}"]'})
    defn = load_pipeline(pipeline)  # read and checked without great-expectations
    result = invoke("check", pipeline)  # check (and run, once a stage has rows) make the suites ready
    assert result.exit_code == 2
    assert f"{bad}: expectation #1 (expect_column_values_to_be_between): invalid arguments:" in result.output
    assert "stages.split_youtube.expectations" in result.output
    assert not (tmp_path / "homelab.sqlite").exists()  # before anything started
    try:
        defn.stage("split_youtube").load_suites()
    except Exception as exc:  # noqa: BLE001
        assert "invalid arguments" in str(exc)
    else:
        raise AssertionError("load_suites accepted invalid arguments")


def test_job_modules_are_checked_from_their_source_without_importing_them(tmp_path):
    jobs = tmp_path / "lightjobs"
    jobs.mkdir()
    (jobs / "__init__.py").write_text("")
    (jobs / "both.py").write_text("import pyspark\n\ndef transform(df):\n    return df\n\n"
                                  "def row_fn(m):\n    return m\n\nif __name__ == '__main__':\n    pass\n")
    pipeline = homelab_copy(tmp_path, replace={'job = "jobs.split_youtube"': 'job = "lightjobs.both"'})
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n" + CLI
    out = _python(code, "status", "--pipeline", pipeline)
    assert out == "imported: [] exit: 2"
    sys.path.insert(0, str(tmp_path))
    try:
        result = invoke("status", "--pipeline", pipeline)
    finally:
        sys.path.remove(str(tmp_path))
    assert result.exit_code == 2
    assert "job module 'lightjobs.both' must define exactly one of transform(df) or row_fn(model)" in result.output
    missing = homelab_copy(tmp_path, replace={'job = "jobs.split_youtube"': 'job = "jobs.nowhere"'})
    result = invoke("status", "--pipeline", missing)
    assert result.exit_code == 2 and "cannot import job module 'jobs.nowhere'" in result.output


HOST_FIRST = """
import sys
from minikafka.cli import pipelines  # the run command's module
from minikafka.pipelines.launch import stagehost  # what run imports to start the stage host
print("imported:", sorted(m for m in ("pyspark", "great_expectations") if m in sys.modules))
"""


def test_run_starts_the_stage_host_before_anything_imports_pyspark():
    # the host's own imports (pandas, the Connect client: ~0.7 s) are on a warm-engine stage's
    # critical path; importing pyspark first (0.2-0.3 s) delayed its start by that much
    assert _python(HOST_FIRST) == "imported: []"
    source = (ROOT / "minikafka" / "cli" / "pipelines.py").read_text()
    run = source[source.index("\ndef run("):source.index("\n@main.command()", source.index("\ndef run("))]
    assert run.index("prestart_stage_host()") < run.index("from ..pipelines.runner import run_pipeline")

"""What every command shares: where the ledger comes from, exit codes, help examples, import path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from minikafka import Source
from minikafka.cli import main
from minikafka.cli.app import working_directory_on_path
from tests.cli.helpers import invoke, seed
from tests.pipelines.helpers import ROOT, homelab_copy


def _commands():
    return sorted(main.commands.items())


@pytest.mark.parametrize("name", [n for n, _ in _commands()])
def test_every_commands_help_ends_with_an_example(name):
    out = invoke(name, "--help")
    assert out.exit_code == 0
    last = " ".join(out.output.split("\nOptions:")[0].strip().split("\n\n")[-1].split())
    assert last.startswith("Example: ") and "minikafka " in last, f"{name}: {last!r}"


def test_every_command_that_opens_a_ledger_takes_source_and_pipeline():
    for name, cmd in _commands():
        opts = {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
        if name in ("topics", "status", "show", "schema", "replay", "export", "backfill", "quarantine", "consumers",
                    "prune", "ingest"):
            assert {"--source", "--pipeline"} <= opts, name
        if name in ("run", "check", "plan", "plot"):
            assert {"--source", "--pipeline"} <= opts, name


def test_no_ledger_given_is_a_usage_error_not_the_examples_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = invoke("topics")
    assert out.exit_code == 2 and "MINIKAFKA_SOURCE" in out.output
    assert list(tmp_path.iterdir()) == []


def test_reading_a_missing_ledger_exits_1_and_creates_nothing(tmp_path):
    missing = tmp_path / "typo" / "ledger.sqlite"
    for args in (["topics"], ["status"], ["show", "items"], ["consumers"], ["quarantine", "items"]):
        out = invoke(*args, "--source", missing)
        assert out.exit_code == 1 and f"no ledger at {missing}" in out.output, args
    assert not missing.parent.exists()


def test_minikafka_source_env_var_picks_the_ledger(db_path):
    seed(db_path)
    out = invoke("topics", "--json", env={"MINIKAFKA_SOURCE": db_path})
    assert out.exit_code == 0 and json.loads(out.output)[0]["topic"] == "items"


def test_pipeline_option_picks_the_pipelines_ledger_and_beats_the_env_var(tmp_path, db_path):
    pipeline = homelab_copy(tmp_path)
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        src._ledger.conn.execute("SELECT 1")
    seed(db_path)
    out = invoke("topics", "--json", "--pipeline", pipeline, env={"MINIKAFKA_SOURCE": db_path})
    assert out.exit_code == 0 and json.loads(out.output) == []


def test_pipeline_commands_take_pipeline_as_argument_or_option(tmp_path):
    pipeline = homelab_copy(tmp_path)
    Source(str(tmp_path / "homelab.sqlite")).close()  # plan checks the ledger exists
    positional = invoke("plan", pipeline)
    assert positional.exit_code == 0 and "spark-submit" in positional.output
    option = invoke("plan", "--pipeline", pipeline)
    assert option.output == positional.output
    env = invoke("plot", env={"MINIKAFKA_PIPELINE": str(pipeline)})
    assert env.exit_code == 0 and "flowchart" in env.output or "graph" in env.output
    assert invoke("plan").exit_code == 2


def test_library_errors_exit_1_without_a_traceback(db_path):
    seed(db_path)
    out = subprocess.run([sys.executable, "-m", "minikafka.cli", "schema", "nope", "--source", db_path],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "Error:" in out.stderr and "Traceback" not in out.stderr


def test_working_directory_is_appended_to_sys_path_after_installed_packages(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p and os.path.abspath(p) != str(tmp_path)])
    site = [p for p in sys.path if "site-packages" in p]
    working_directory_on_path()
    assert sys.path[-1] == str(tmp_path) and sys.path.index(site[0]) < len(sys.path) - 1
    working_directory_on_path()
    assert sys.path.count(str(tmp_path)) == 1


def test_console_script_imports_models_from_the_working_directory(tmp_path, db_path):
    (tmp_path / "mymodels.py").write_text("from pydantic import BaseModel\nclass Note(BaseModel):\n    text: str\n")
    script = Path(sys.executable).parent / "minikafka"
    assert script.exists()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([str(script), "ingest", "--create", "--source", db_path, "--model", "mymodels:Note", "notes", "-"],
                         input='{"text": "hi"}\n', capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    with Source(db_path) as src:
        assert src.layout("notes").field_names == ["text"]


def test_pipeline_commands_write_to_source_instead_of_the_files_ledger(tmp_path):
    pipeline = homelab_copy(tmp_path)
    other = tmp_path / "other.sqlite"
    run = invoke("run", pipeline, "--source", other, "--create")  # nothing pending: no stage starts a JVM
    assert run.exit_code == 0, run.output
    plan = invoke("plan", pipeline, "--source", other)
    assert plan.exit_code == 0 and f"--source {other}" in plan.output
    assert not (tmp_path / "homelab.sqlite").exists()
    with Source(str(other)) as src:
        assert "rss.items" in src.topics() and len(src.runs()) >= 1
    counts = invoke("plot", pipeline, "--counts", "--source", other)
    assert counts.exit_code == 0 and "rss.items" in counts.output


def test_ingest_with_a_pipeline_and_source_uses_that_ledger(tmp_path):
    pipeline = homelab_copy(tmp_path)
    other = tmp_path / "other.sqlite"
    line = '{"url": "https://a.example/1", "feed": "hn", "title": "t", "body": "b", "published": "2026-01-01T00:00:00Z"}\n'
    out = invoke("ingest", "--pipeline", pipeline, "--source", other, "--create", "rss.items", "-", input=line)
    assert out.exit_code == 0, out.output
    assert not (tmp_path / "homelab.sqlite").exists()
    with Source(str(other)) as src:
        assert src.layout("rss.items") and src._ledger.conn.execute('SELECT count(*) FROM "rss.items"').fetchone()[0] == 1


def test_a_file_that_is_not_a_ledger_exits_1_naming_it(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("not a database at all, just some text that is long enough to look like a header" * 20)
    out = invoke("topics", "--source", junk)
    assert out.exit_code == 1 and str(junk) in out.output

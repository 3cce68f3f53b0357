"""One contract for a stage's process: the launchers build its arguments with ``StageCall`` and
the job parses them back with it; nothing else spells a stage process's arguments."""

from __future__ import annotations

import ast
from datetime import date
from pathlib import Path

import pytest

from minikafka.pipelines import load_pipeline
from minikafka.pipelines.launch.call import StageCall
from minikafka.pipelines.launch.client import client_command
from minikafka.pipelines.launch.submit import submit_command
from minikafka.spark.engine import ENGINE_URL_ENV
from tests.pipelines.helpers import homelab_copy

PACKAGE = Path(__file__).resolve().parents[2] / "minikafka"


@pytest.mark.parametrize("given", [
    {},
    {"staging": "file:///mnt/shared/mk", "dry_run": True},
    {"consumer_ids": {"rss.items": 3, "a.b": 12}, "py_files": "/tmp/code.zip"},
    {"remote": "sc://127.0.0.1:15002"},
    {"logical_date": date(2024, 3, 31)},
])
def test_a_stage_call_reads_back_from_its_arguments_as_it_was_built(tmp_path, given):
    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    call = StageCall.of(defn, defn.stage("keep_articles"), "keep_articles-run-1", **given)
    argv = call.to_argv()
    assert argv[0] == call.job
    assert StageCall.from_argv(argv[1:], job=argv[0]) == call


def test_a_stage_call_with_a_token_reads_its_url_back_from_the_environment(tmp_path, monkeypatch):
    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    call = StageCall.of(defn, defn.stage("keep_articles"), "r1", remote="sc://h:15002/;token=secret")
    assert "secret" not in " ".join(call.to_argv())
    monkeypatch.setenv(ENGINE_URL_ENV, call.env()[ENGINE_URL_ENV])
    assert StageCall.from_argv(call.to_argv()[1:], job=call.job) == call


def test_a_bad_consumer_id_is_a_usage_error():
    with pytest.raises(SystemExit) as stopped:
        StageCall.from_argv(["--pipeline", "p.toml", "--stage", "s", "--consumer-id", "topic"])
    assert stopped.value.code == 2


def test_a_bad_logical_date_is_a_usage_error_naming_the_form(capsys):
    with pytest.raises(SystemExit) as stopped:
        StageCall.from_argv(["--pipeline", "p.toml", "--stage", "s", "--logical-date", "31/03/2024"])
    assert stopped.value.code == 2
    assert "--logical-date: logical date must be a date YYYY-MM-DD" in capsys.readouterr().err


def test_submit_and_client_commands_end_with_the_stage_calls_arguments(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    sd = defn.stage("keep_articles")
    call = StageCall.of(defn, sd, "r1", staging="file:///s", consumer_ids={"rss.items": 1})
    submitted = submit_command(defn, sd, master="local[1]", run_id="r1", staging="file:///s",
                               consumer_ids={"rss.items": 1})
    assert submitted[-len(call.to_argv()):] == call.to_argv()
    client = client_command(defn, sd, "sc://h:1", "r1", staging="file:///s", consumer_ids={"rss.items": 1})
    assert client[1:] == StageCall.of(defn, sd, "r1", staging="file:///s", consumer_ids={"rss.items": 1},
                                      remote="sc://h:1").to_argv()


def test_only_the_stage_call_spells_a_stage_process_s_options():
    """The options a stage process takes appear as string literals in call.py alone."""
    options = {"--stage", "--run-id", "--consumer-id", "--remote-env", "--dry-run"}
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "call.py" and path.parent.name == "launch":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in options and path.parent.name != "cli":
                spelled.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.value}")
    assert not spelled, spelled

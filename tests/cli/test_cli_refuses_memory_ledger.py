"""The CLI refuses ':memory:' and an empty path as a ledger (a usage error); the API still opens ':memory:'."""

from __future__ import annotations

import pytest

from minikafka import Source
from tests.cli.helpers import Item, invoke


@pytest.fixture
def dump(tmp_path):
    path = tmp_path / "dump.jsonl"
    path.write_text('{"title": "t", "url": "u", "score": 1.0}\n')
    return path


def test_ingest_refuses_a_memory_ledger_instead_of_throwing_the_rows_away(dump, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = invoke("ingest", "--source", ":memory:", "--model", "tests.cli.helpers:Item", "items", dump)
    assert out.exit_code == 2
    assert "':memory:'" in out.output and "appended" not in out.output
    assert not (tmp_path / ":memory:").exists()


@pytest.mark.parametrize("args", [("topics",), ("upgrade",), ("prune", "--runs-older-than", "1d"),
                                  ("show", "items")])
def test_commands_refuse_a_memory_ledger_from_the_environment(args):
    out = invoke(*args, env={"MINIKAFKA_SOURCE": ":memory:"})
    assert out.exit_code == 2
    assert "$MINIKAFKA_SOURCE ':memory:' is an in-memory database" in out.output


@pytest.mark.parametrize("args", [("topics",), ("upgrade",), ("prune", "--runs-older-than", "1d")])
def test_commands_refuse_a_memory_or_empty_source_option(args):
    out = invoke(*args, "--source", ":memory:")
    assert out.exit_code == 2 and "--source ':memory:'" in out.output
    out = invoke(*args, "--source", "")
    assert out.exit_code == 2 and "--source is empty" in out.output


def test_pipeline_command_refuses_a_memory_source_override(tmp_path):
    pipeline = tmp_path / "p.toml"
    pipeline.write_text('source = "ledger.sqlite"\n')
    out = invoke("plan", pipeline, "--source", ":memory:")
    assert out.exit_code == 2 and "':memory:'" in out.output


def test_the_python_api_still_opens_a_memory_ledger():
    with Source(":memory:") as src:
        src.topic("items", Item, dedup=("url",)).append({"title": "t", "url": "u", "score": 1.0})
        assert src.topics() == ["items"]

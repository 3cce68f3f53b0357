"""A pipeline's declared topics are usable on a fresh ledger, before any JVM starts.

Every command given --pipeline that writes creates the topics the file declares (missing ones
only: an existing topic is checked where it is used), or says in one line how to start the
ledger; backfill into a declared topic on a ledger that does not exist yet needs no
'run --create' first.
"""

from __future__ import annotations

import pytest

import minikafka.spark.session
from minikafka import Source
from tests.cli.helpers import invoke
from tests.pipelines.helpers import homelab_copy

DECLARED = ["rss.articles", "rss.feed_day", "rss.items", "rss.scored", "rss.summaries", "rss.youtube"]
LINE = '{"url": "https://a.example/1", "feed": "hn", "title": "t", "body": "b", "published": "2026-01-01T00:00:00Z"}\n'


class SparkStarted(Exception):
    """Raised where the JVM would start: what the ledger holds at that moment is recorded."""


@pytest.fixture
def spark_marker(monkeypatch):
    """Starting Spark records the ledger's topics at that moment and stops the command."""
    seen: dict[str, list[str]] = {}

    def marker(*args, **kwargs):
        seen["topics"] = _topics(seen["ledger"]) if "ledger" in seen else None
        raise SparkStarted

    monkeypatch.setattr(minikafka.spark.session, "build_session", marker)
    return seen


def _topics(ledger) -> list[str]:
    with Source(str(ledger), read_only=True) as src:
        return src.topics()


def test_backfill_into_a_declared_topic_on_a_fresh_ledger_creates_the_topics_before_spark_starts(tmp_path,
                                                                                                  spark_marker):
    pipeline = homelab_copy(tmp_path)
    ledger = tmp_path / "homelab.sqlite"
    spark_marker["ledger"] = ledger
    dump = tmp_path / "dump.jsonl"
    dump.write_text(LINE)
    with pytest.raises(SparkStarted):  # a one-line dump loads without Spark unless Spark is asked for
        invoke("backfill", "--pipeline", pipeline, "rss.items", dump, "--engine", "spark")
    assert spark_marker["topics"] == DECLARED


def test_backfill_of_an_undeclared_topic_with_a_pipeline_says_so_before_spark_starts(tmp_path, spark_marker):
    pipeline = homelab_copy(tmp_path)
    dump = tmp_path / "dump.jsonl"
    dump.write_text(LINE)
    out = invoke("backfill", "--pipeline", pipeline, "rss.nope", dump)
    assert out.exit_code == 1, out.output
    assert f"topic 'rss.nope' is not declared in {pipeline}" in out.output and "Traceback" not in out.output
    assert "starting Spark" not in out.output


def test_backfill_with_a_model_into_a_topic_the_ledger_lacks_says_how_to_create_it_before_spark_starts(
        tmp_path, spark_marker):
    ledger = tmp_path / "ledger.sqlite"
    Source(str(ledger)).close()
    dump = tmp_path / "dump.jsonl"
    dump.write_text('{"title": "a", "url": "ua", "score": 0.5}\n')
    out = invoke("backfill", "--source", ledger, "--model", "tests.cli.helpers:Item", "items", dump)
    assert out.exit_code == 1, out.output
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "no topic 'items'" in lines[0] and "minikafka ingest" in lines[0], out.output
    assert "starting Spark" not in out.output


@pytest.mark.parametrize("args", [
    ["replay", "rss.items", "--consumer", "split_youtube"],
    ["quarantine", "rss.items", "purge", "--all"],
    ["retention"],
], ids=lambda a: a[0])
def test_writing_commands_given_a_pipeline_create_its_declared_topics(tmp_path, args):
    pipeline = homelab_copy(tmp_path)
    ledger = tmp_path / "homelab.sqlite"
    Source(str(ledger)).close()  # a ledger with no topic yet
    invoke(*args, "--pipeline", pipeline)
    assert _topics(ledger) == DECLARED


def test_reading_commands_given_a_pipeline_create_nothing(tmp_path):
    pipeline = homelab_copy(tmp_path)
    ledger = tmp_path / "homelab.sqlite"
    Source(str(ledger)).close()
    assert invoke("topics", "--pipeline", pipeline).exit_code == 0
    assert _topics(ledger) == []


def test_a_writing_command_on_a_missing_declared_ledger_says_in_one_line_how_to_start_it(tmp_path):
    pipeline = homelab_copy(tmp_path)
    out = invoke("replay", "rss.items", "--consumer", "split_youtube", "--pipeline", pipeline)
    assert out.exit_code == 1, out.output
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"no ledger at {tmp_path / 'homelab.sqlite'}" in lines[0], out.output
    assert f"minikafka run {pipeline} --create" in lines[0]
    assert not (tmp_path / "homelab.sqlite").exists()


def test_run_on_a_missing_declared_ledger_says_in_one_line_how_to_start_it(tmp_path):
    pipeline = homelab_copy(tmp_path)
    out = invoke("run", pipeline)
    assert out.exit_code == 1, out.output
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--create" in lines[0] and "minikafka ingest" in lines[0], out.output


def test_run_create_on_a_fresh_ledger_leaves_every_declared_topic(tmp_path):
    pipeline = homelab_copy(tmp_path)
    out = invoke("run", pipeline, "--create")  # nothing pending: no JVM
    assert out.exit_code == 0, out.output
    assert _topics(tmp_path / "homelab.sqlite") == DECLARED


@pytest.mark.spark
def test_backfill_into_a_declared_topic_on_a_ledger_that_does_not_exist_yet_loads_it(tmp_path):
    pipeline = homelab_copy(tmp_path)
    dump = tmp_path / "dump.jsonl"
    dump.write_text(LINE)
    out = invoke("backfill", "--pipeline", pipeline, "rss.items", dump, "--master", "local[1]")
    assert out.exit_code == 0, out.output
    with Source(str(tmp_path / "homelab.sqlite"), read_only=True) as src:
        assert src.topics() == DECLARED
        assert src.layout("rss.items") and src.model_of("rss.items")
        assert len(list(src.topic("rss.items", src.model_of("rss.items"), dedup=("url",)).iter_new())) == 1

"""Dry runs register no consumer; a consumer no stage declares any more is reported with the command that drops it."""

from __future__ import annotations

import shlex

import pytest

from minikafka import Source
from tests.cli.helpers import invoke
from tests.pipelines.helpers import homelab_copy


def _ledger(tmp_path, rows=0):
    """The pipeline's ledger with its input topic (and ``rows`` rows), no consumer registered."""
    from schemas.homelab import RssItem

    with Source(str(tmp_path / "homelab.sqlite")) as src:
        src.topic("rss.items", RssItem, dedup=("url",)).extend(
            [{"title": f"t{i}", "url": f"https://www.youtube.com/watch?v={i}", "feed": "f", "body": "b",
              "published": "2026-01-01T00:00:00Z"} for i in range(rows)])


def _consumers(tmp_path):
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        return src._ledger.conn.execute("SELECT topic, name FROM _minikafka_consumers ORDER BY id").fetchall()


def test_dry_run_registers_no_consumer(tmp_path):
    pipeline = homelab_copy(tmp_path)
    _ledger(tmp_path)
    out = invoke("run", pipeline, "--dry-run")  # nothing pending: no JVM
    assert out.exit_code == 0, out.output
    assert _consumers(tmp_path) == []
    assert invoke("plot", pipeline, "--counts").exit_code == 0
    assert _consumers(tmp_path) == []
    assert invoke("run", pipeline).exit_code == 0  # a real run registers every stage's consumer
    assert ("rss.items", "split_youtube") in _consumers(tmp_path)


@pytest.mark.spark
def test_check_registers_no_consumer_and_leaves_rows_new(tmp_path):
    pipeline = homelab_copy(tmp_path)
    _ledger(tmp_path, rows=2)
    out = invoke("check", pipeline, "--stage", "split_youtube")
    assert out.exit_code == 0, out.output
    assert "split_youtube: suite" in out.output
    assert _consumers(tmp_path) == []
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        assert src.layout("rss.items") and src.runs() == []
        assert src._ledger.conn.execute('SELECT count(*) FROM "rss.items"').fetchone()[0] == 2


def test_retired_stage_consumer_is_reported(tmp_path):
    pipeline = homelab_copy(tmp_path)
    _ledger(tmp_path)
    assert invoke("run", pipeline).exit_code == 0
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        src.register_consumers([("rss.items", "old_stage")])
    expected = (f"consumer 'old_stage' of rss.items is not in {pipeline}: drop it with "
                f"`minikafka consumers rss.items --drop old_stage --pipeline {pipeline}`")
    for args in (("run", pipeline), ("plan", pipeline), ("status", "--pipeline", pipeline),
                 ("consumers", "--pipeline", pipeline)):
        out = invoke(*args)
        assert out.exit_code == 0, (args, out.output)
        assert expected in out.output, args
        assert "split_youtube' of" not in out.output
    command = expected.split("`")[1]
    dropped = invoke(*shlex.split(command)[1:])
    assert dropped.exit_code == 0 and "dropped consumer old_stage from rss.items" in dropped.output
    assert ("rss.items", "old_stage") not in _consumers(tmp_path)
    assert "old_stage" not in invoke("run", pipeline).output


def test_a_delivery_group_of_the_pipeline_file_is_not_retired(tmp_path):
    pipeline = homelab_copy(tmp_path, extra='\n[[deliveries]]\nname = "notify"\ntopic = "rss.scored"\n'
                                             'endpoint = "http://127.0.0.1:9/hook"\n')
    _ledger(tmp_path)
    assert invoke("run", pipeline).exit_code == 0
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        src.register_consumers([("rss.scored", "notify")])
    out = invoke("consumers", "--pipeline", pipeline)
    assert out.exit_code == 0 and "is not in" not in out.output and "retired" not in out.output

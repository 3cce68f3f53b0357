"""The control path of one stage, traced statement by statement: a run of one stage opens the
ledger at most twice, registers the stage's consumer once and reads each of its topics'
layouts once.

Every connection the ledger opens is traced (``sqlite3.connect`` in ``ledger.transactions.connection``),
so a statement run on a second connection, or a second connection itself, is counted too.
Under spark-submit the runner's process and the job's are traced apart (the job's with the
very arguments the runner gives it) and their counts added.
"""

from __future__ import annotations

import re
import sqlite3

import pytest

import minikafka.ledger.transactions.connection as connection
from minikafka import job
from minikafka.pipelines import load_pipeline
from minikafka.pipelines.launch.submit import submit_command
from minikafka.pipelines.opening import open_source
from minikafka.pipelines.runner import run_pipeline
from tests.pipelines.helpers import generate, homelab_copy
from tests.pipelines.test_runner import ingest

pytestmark = pytest.mark.spark

STAGE, INPUT, OUTPUT = "split_youtube", "rss.items", "rss.youtube"
OTHERS = ("rss.articles", "rss.summaries", "rss.scored")  # the pipeline's topics the stage does not touch


class Trace:
    """The ledger's connections opened while it is installed, and their statements."""

    def __init__(self, monkeypatch, path: str):
        self.path, self.opened, self.statements = path, 0, []
        real = sqlite3.connect

        def connect(target, *args, **kwargs):
            conn = real(target, *args, **kwargs)
            if str(target).removeprefix("file:").split("?")[0].endswith(self.path.rsplit("/", 1)[-1]):
                self.opened += 1
                conn.set_trace_callback(self.statements.append)
            return conn

        monkeypatch.setattr(connection.sqlite3, "connect", connect)

    def count(self, pattern: str) -> int:
        return len([s for s in self.statements if re.search(pattern, s, re.IGNORECASE)])

    def registrations(self) -> int:
        """Registrations (or look-ups) of the stage's consumer: each starts with this SELECT."""
        return self.count(rf"SELECT id FROM _minikafka_consumers WHERE topic = '{INPUT}' AND name = '{STAGE}'")

    def layout_reads(self, topic: str) -> int:
        """Reads of the topic's catalog row (``catalog.CATALOG_SELECT``): its layout."""
        return self.count(rf"SELECT name, json_schema, columns, dedup, fingerprint, partitions, key "
                          rf"FROM _minikafka_topics WHERE name = '{re.escape(topic)}'")


@pytest.fixture
def pipeline(spark, tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path))
    assert ingest(defn, generate(tmp_path, 40)).appended > 0
    return defn


def test_a_stage_run_in_process_opens_the_ledger_once_registers_once_reads_each_layout_once(pipeline, monkeypatch):
    trace = Trace(monkeypatch, str(pipeline.source))
    result = run_pipeline(pipeline, stage=STAGE, in_process=True, echo=lambda m: None)
    assert [o.status for o in result.outcomes] == ["succeeded"] and result.outcomes[0].run["rows_in"] > 0
    assert trace.opened == 1
    assert trace.registrations() == 1
    assert trace.layout_reads(INPUT) == 1 and trace.layout_reads(OUTPUT) == 1


def test_a_stage_under_spark_submit_opens_the_ledger_twice_registers_once_reads_each_layout_once_per_process(
        pipeline, monkeypatch, capsys):
    # the runner's process, with the real spark-submit of the stage
    runner = Trace(monkeypatch, str(pipeline.source))
    result = run_pipeline(pipeline, stage=STAGE, engine="submit", echo=lambda m: None)
    assert [o.status for o in result.outcomes] == ["succeeded"] and result.outcomes[0].run["rows_in"] > 0
    assert runner.opened == 1 and runner.registrations() == 1
    assert runner.layout_reads(INPUT) == 1 and runner.layout_reads(OUTPUT) == 1

    # the job's process, as the runner starts it (its arguments), on 40 more rows
    more = ingest(pipeline, generate(pipeline.source.parent, 40, start=1000)).appended
    assert more > 0
    cmd = submit_command(pipeline, pipeline.stage(STAGE), master="local[2]", run_id="r-traced",
                         consumer_ids=_ids(pipeline))
    stage = Trace(monkeypatch, str(pipeline.source))
    assert job.main(cmd[cmd.index(str(pipeline.stage(STAGE).job_file())) + 1:]) == 0
    assert f'"rows_in": {more}' in capsys.readouterr().out
    assert stage.opened == 1
    assert stage.registrations() == 0  # the runner's ids: the consumer is registered once in all
    assert stage.layout_reads(INPUT) == 1 and stage.layout_reads(OUTPUT) == 1
    assert not any(stage.layout_reads(topic) for topic in OTHERS)  # only the stage's own topics


def test_a_job_started_by_hand_registers_its_consumer_once_and_reads_each_layout_once(pipeline, monkeypatch, capsys):
    trace = Trace(monkeypatch, str(pipeline.source))
    assert job.main(["--pipeline", str(pipeline.path), "--stage", STAGE]) == 0
    assert '"status": "succeeded"' in capsys.readouterr().out
    assert trace.opened == 1
    assert trace.registrations() == 1
    assert trace.layout_reads(INPUT) == 1 and trace.layout_reads(OUTPUT) == 1


def _ids(defn) -> dict[str, int]:
    registered: dict[tuple[str, str], int] = {}
    with open_source(defn, registered=registered):
        pass
    return {name: cid for (stage, name), cid in registered.items() if stage == STAGE}

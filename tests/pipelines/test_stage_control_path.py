"""The control path of one stage, traced statement by statement: the stage's process (the job
spark-submit or the engine's client starts) opens the ledger once, registers the stage's
consumer once and reads each of its topics' layouts once.

Every connection the ledger opens is traced (``sqlite3.connect`` in ``ledger.connection``),
so a statement run on a second connection, or a second connection itself, is counted too.
"""

from __future__ import annotations

import re
import sqlite3

import pytest

import minikafka.ledger.connection as connection
from minikafka import job
from minikafka.pipelines import load_pipeline
from tests.pipelines.helpers import generate, homelab_copy
from tests.pipelines.test_runner import ingest

pytestmark = pytest.mark.spark

STAGE, INPUT, OUTPUT = "split_youtube", "rss.items", "rss.youtube"


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


def test_a_stage_under_spark_submit_opens_the_ledger_once_registers_once_reads_each_layout_once(
        pipeline, monkeypatch, capsys):
    trace = Trace(monkeypatch, str(pipeline.source))
    assert job.main(["--pipeline", str(pipeline.path), "--stage", STAGE]) == 0
    assert '"status": "succeeded"' in capsys.readouterr().out
    # the job's process; the runner that starts it opens the ledger once more: twice in all
    assert trace.opened == 1
    assert trace.registrations() == 1
    assert trace.layout_reads(INPUT) == 1 and trace.layout_reads(OUTPUT) == 1

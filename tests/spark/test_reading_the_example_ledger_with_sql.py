"""The example pipeline's ledger after a Spark run, read with plain sqlite3 as the SQL page says.

After a full run, more items arrive and only ``split_youtube`` runs again. The truth is then
known from the runs alone: every stage is past every row that existed at the first run;
``split_youtube`` also past the new items; ``keep_articles`` and ``transcribe`` are not.
The page's queries (docs/concepts/reading-the-ledger-with-sql.md), run through the standard
library's sqlite3 on a read-only connection, must give exactly that, per row, per topic and
per consumer.
"""

from __future__ import annotations

import sqlite3

import pytest

from minikafka.connectors.ingest import ingest_jsonl
from minikafka.pipelines import load_pipeline
from minikafka.pipelines.opening import open_source
from minikafka.pipelines.runner import run_pipeline
from tests.pipelines.helpers import generate, homelab_copy
from tests.util import sqldoc

pytestmark = pytest.mark.spark

CONSUMERS = {"rss.items": ["split_youtube", "keep_articles", "feed_day"], "rss.youtube": ["transcribe"],
             "rss.articles": ["llm_summary"], "rss.summaries": ["score"], "rss.scored": []}


def on(sql: str, topic: str, consumer: str | None = None) -> str:
    """A query of the page, which names rss.items and split_youtube, for another topic and consumer."""
    sql = sql.replace('"rss.items', f'"{topic}').replace("'rss.items'", f"'{topic}'")
    return sql if consumer is None else sql.replace("'split_youtube'", f"'{consumer}'")


def ids(conn, topic: str) -> list[int]:
    return [r[0] for r in conn.execute(f'SELECT "_id" FROM "{topic}" ORDER BY "_id"')]


def test_the_pages_queries_give_the_true_status_of_every_row_per_topic_and_per_consumer(spark, tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path))
    with open_source(defn) as src:
        ingest_jsonl(src._topics["rss.items"], generate(tmp_path, 60))
    assert run_pipeline(defn, in_process=True, echo=lambda m: None).ok
    conn = sqlite3.connect(f"file:{defn.source}?mode=ro", uri=True)
    first = {topic: ids(conn, topic) for topic in CONSUMERS}  # every row existing at the full run
    with open_source(defn) as src:
        ingest_jsonl(src._topics["rss.items"], generate(tmp_path, 20, start=5_000))
    assert run_pipeline(defn, in_process=True, stage="split_youtube", echo=lambda m: None).ok

    done = {c: set(first[t]) for t, cs in CONSUMERS.items() for c in cs}  # what each consumer is past
    done["split_youtube"] = set(ids(conn, "rss.items"))
    assert len(ids(conn, "rss.youtube")) > len(first["rss.youtube"])  # split_youtube wrote new rows

    for topic, consumers in CONSUMERS.items():
        every = ids(conn, topic)
        handled = [i for i in every if consumers and all(i in done[c] for c in consumers)]
        truth = {i: "handled" if i in handled else "new" for i in every}
        rows = conn.execute(on(sqldoc.query("every row of a topic with its status").replace(
            "url, ", ""), topic)).fetchall()
        assert dict(rows) == truth, topic
        counts = dict(conn.execute(on(sqldoc.query("how many rows are new and handled"), topic)).fetchall())
        assert counts.get("handled", 0) == len(handled) and counts.get("new", 0) == len(every) - len(handled)

        per_row = conn.execute(on(sqldoc.query("every row for every consumer"), topic)).fetchall()
        assert per_row == sorted((i, c, "handled" if i in done[c] else "new") for i in every for c in consumers)
        lag = conn.execute(on(sqldoc.query("new and handled rows per consumer"), topic)).fetchall()
        assert lag == sorted((c, len(set(every) - done[c]), len(done[c] & set(every))) for c in consumers)
        for consumer in consumers:
            todo = conn.execute(on(sqldoc.query("the rows one consumer has not done yet"), topic, consumer))
            assert [r[0] for r in todo] == sorted(set(every) - done[consumer])
            by_hand = conn.execute(on(sqldoc.query("the status for one consumer, from the state tables"), topic,
                                      consumer)).fetchall()
            assert by_hand == [(i, "handled" if i in done[consumer] else "new") for i in every]

    new_items = set(ids(conn, "rss.items")) - set(first["rss.items"])
    assert new_items and all(i not in done["keep_articles"] for i in new_items)
    with pytest.raises(sqlite3.OperationalError, match="no such column: _status"):
        conn.execute("SELECT count(*) FROM \"rss.items\" WHERE _status = 'new'")

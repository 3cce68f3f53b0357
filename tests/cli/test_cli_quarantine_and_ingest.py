"""quarantine (list, show, requeue, purge) and ingest from stdin or with --source --model."""

from __future__ import annotations

import json

from minikafka import Source
from minikafka.util.clock import utc_now
from tests.cli.helpers import Item, invoke, seed

MODEL = "tests.cli.helpers:Item"
GOOD = '{"title": "a", "url": "ua", "score": 0.5}\n'
BAD = '{"title": "b", "url": "ub", "score": "high"}\n'


def test_ingest_reads_standard_input_with_source_and_model(db_path):
    out = invoke("ingest", "--create", "--source", db_path, "--model", MODEL, "--dedup", "url", "items", "-",
                 input=GOOD + BAD + "not json\n")
    assert out.exit_code == 0, out.output
    assert "<stdin>: 3 lines, 1 appended, 0 duplicates, 2 quarantined" in out.output
    with Source(db_path) as src:
        t = src.topic("items", Item, dedup=("url",))
        assert [m.url for m in t.iter_new()] == ["ua"]
        assert sorted(q["origin"] for q in src.quarantined("items")) == ["<stdin>:2", "<stdin>:3"]


def test_ingest_into_an_existing_topic_uses_the_stored_model(db_path, tmp_path):
    seed(db_path, n=1)
    f = tmp_path / "more.jsonl"
    f.write_text(GOOD)
    out = invoke("ingest", "items", f, env={"MINIKAFKA_SOURCE": db_path})
    assert out.exit_code == 0, out.output
    with Source(db_path) as src:
        assert src.topic("items", Item, dedup=("url",)).count() == 2


def test_ingest_new_topic_without_model_is_a_usage_error(db_path):
    out = invoke("ingest", "--create", "--source", db_path, "fresh", "-", input=GOOD)
    assert out.exit_code == 2 and "--model" in out.output


def test_ingest_exits_1_when_every_line_was_quarantined(db_path):
    out = invoke("ingest", "--create", "--source", db_path, "--model", MODEL, "items", "-", input=BAD)
    assert out.exit_code == 1 and "no line of <stdin> could be stored" in out.output
    with Source(db_path) as src:
        assert len(src.quarantined("items")) == 1


def _quarantine_stdin(db_path, text):
    invoke("ingest", "--create", "--source", db_path, "--model", MODEL, "--dedup", "url", "items", "-", input=text)


def test_quarantine_lists_and_shows_one_row(db_path):
    _quarantine_stdin(db_path, GOOD + BAD)
    listed = invoke("quarantine", "items", "--source", db_path)
    assert listed.exit_code == 0 and "1 row(s) of items in quarantine" in listed.output and "<stdin>:2" in listed.output
    [row] = json.loads(invoke("quarantine", "items", "--json", "--source", db_path).output)
    shown = json.loads(invoke("quarantine", "items", row["id"], "--json", "--source", db_path).output)
    assert shown["origin"] == "<stdin>:2" and json.loads(shown["payload"])["score"] == "high"
    assert invoke("quarantine", "items", "show", 999, "--source", db_path).exit_code == 1


def test_quarantine_requeue_appends_rows_that_now_validate_and_keeps_the_rest(db_path):
    _quarantine_stdin(db_path, GOOD + BAD + '{"title": "c", "url": "uc", "score": 1}\n')
    with Source(db_path) as src, src._ledger.atomic() as conn:  # "ub" still fails; "uc2" (another file) now fits
        conn.execute("UPDATE _minikafka_quarantine SET payload = ? WHERE origin = '<stdin>:2'",
                     ('{"title": "b", "url": "ub", "score": "high"}',))
        conn.execute("INSERT INTO _minikafka_quarantine (topic, payload, reason, origin, created_at) "
                     "VALUES ('items', ?, 'old', 'x.jsonl:1', ?)", ('{"title": "c2", "url": "uc2", "score": 2}',
                                                                     utc_now()))
    out = invoke("quarantine", "items", "requeue", "--all", "--json", "--source", db_path)
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["appended"] == 1 and len(result["still_failing"]) == 1
    with Source(db_path) as src:
        assert sorted(m.url for m in src.topic("items", Item, dedup=("url",)).iter_new()) == ["ua", "uc", "uc2"]
        [left] = src.quarantined("items")
        assert left["origin"] == "<stdin>:2" and left["attempts"] == 2 and left["reason"].startswith("still invalid")


def test_quarantine_requeue_makes_a_stage_row_pending_again_for_its_consumer(db_path):
    seed(db_path, n=2, consumers=("clean", "score"))
    with Source(db_path) as src:
        t = src.topic("items", Item, dedup=("url",))
        t.set_handled(1, consumer="clean")
        with src._ledger.atomic() as conn:
            conn.execute("INSERT INTO _minikafka_quarantine (topic, consumer, row_id, payload, reason, attempts, origin,"
                         " created_at) VALUES ('items', 'clean', 1, '{}', 'transform failed', 3, 'stage', ?)",
                         (utc_now(),))
    [row] = json.loads(invoke("quarantine", "items", "--json", "--source", db_path).output)
    out = invoke("quarantine", "items", "requeue", row["id"], "--source", db_path)
    assert out.exit_code == 0 and "1 pending again" in out.output
    with Source(db_path) as src:
        t = src.topic("items", Item, dedup=("url",))
        assert [r.id for r in t.iter_new(records=True, consumer="clean")] == [1, 2]
        assert src.quarantined("items") == []


def test_quarantine_purge_needs_ids_or_all_and_deletes_only_those(db_path):
    _quarantine_stdin(db_path, BAD + BAD.replace("ub", "ub2") + BAD.replace("ub", "ub3"))
    ids = [r["id"] for r in json.loads(invoke("quarantine", "items", "--json", "--source", db_path).output)]
    assert invoke("quarantine", "items", "purge", "--source", db_path).exit_code == 2
    assert invoke("quarantine", "items", "purge", 12345, "--source", db_path).exit_code == 1
    out = invoke("quarantine", "items", "purge", ids[0], "--source", db_path)
    assert out.exit_code == 0 and "purged 1" in out.output
    with Source(db_path) as src:
        assert sorted(r["id"] for r in src.quarantined("items")) == sorted(ids[1:])
    assert "purged 0" in invoke("quarantine", "items", "purge", "--older-than", "1d", "--source", db_path).output
    assert "purged 2" in invoke("quarantine", "items", "purge", "--all", "--source", db_path).output


def test_ingest_into_a_pipeline_whose_job_module_cannot_be_imported_still_loads_the_topic(tmp_path):
    from tests.pipelines.helpers import ROOT, homelab_copy

    pipeline = homelab_copy(tmp_path, replace={'job = "jobs.score"': 'job = "jobs.does_not_exist"'})
    out = invoke("ingest", pipeline, "rss.items", ROOT / "examples" / "feed.jsonl")
    assert out.exit_code == 0, out.output
    assert "appended" in out.output and "does_not_exist" not in out.output
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        assert src.layout("rss.items").name == "rss.items"
        assert src.topic("rss.items", src.model_of("rss.items"), dedup=("url",)).count() > 0
    plan = invoke("plan", pipeline)  # the commands that run the stages still refuse, naming the job
    assert plan.exit_code != 0 and "cannot import job module 'jobs.does_not_exist'" in plan.output

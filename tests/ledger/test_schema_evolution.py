"""Additive schema evolution without a rewrite (issue 42 item 3): a model that only adds
Optional fields or fields with a default is applied in place, whatever the row count; any
other change stays a migration with a dry run saying what it rewrites."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from minikafka import SchemaMismatchError, Source
from minikafka.ledger.topics import evolution
from tests.ledger.evolve_models import Reading, ReadingRequired, ReadingRetyped, ReadingV2

REPO = Path(__file__).resolve().parents[2]


def seeded(path, n: int) -> str:
    with Source(str(path)) as src:
        t = src.topic("readings", Reading, dedup=("sensor",))
        for start in range(0, n, 50_000):
            t.extend([Reading(sensor=f"s{i}", value=i) for i in range(start, min(n, start + 50_000))])
    return str(path)


def columns(path: str, table: str = "readings") -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
    finally:
        conn.close()


def test_adding_optional_fields_to_100k_rows_rewrites_nothing_and_old_rows_read_defaults(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 100_000)
    with Source(path) as src:
        pages_before = src.ledger.conn.execute("PRAGMA page_count").fetchone()[0]
        started = time.perf_counter()
        plan = src.evolve("readings", ReadingV2)
        took = time.perf_counter() - started
        assert plan.kind == "additive" and [c.name for c in plan.added] == ["unit", "calibrated", "seen_at"]
        assert took < 0.5, took
        # no row was rewritten: the file did not grow by a copy of the table
        assert src.ledger.conn.execute("PRAGMA page_count").fetchone()[0] <= pages_before + 2
        t = src.topic("readings", ReadingV2, dedup=("sensor",))
        first = next(iter(t.iter_new()))
        assert first == ReadingV2(sensor="s0", value=0, unit=None, calibrated=False, seen_at=None)
        t.append({"sensor": "new", "value": 1, "unit": "C", "calibrated": True})
        assert t.count() == 100_001
        assert src.ledger.conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert columns(path)[-3:] == ["unit", "calibrated", "seen_at"]


def test_an_evolved_bool_column_keeps_its_check_constraint(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 3)
    with Source(path) as src:
        src.evolve("readings", ReadingV2)
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            src.ledger.conn.execute('UPDATE "readings" SET "calibrated" = 5 WHERE "_id" = 1')


def test_reopening_with_an_added_field_names_the_field_and_the_evolve_command(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 3)
    with Source(path) as src, pytest.raises(SchemaMismatchError) as err:
        src.topic("readings", ReadingV2, dedup=("sensor",))
    assert "field 'unit' added" in str(err.value) and "minikafka evolve readings" in str(err.value)


def test_the_added_field_hint_names_the_pipeline_files_schema_changes_key_and_evolve_with_pipeline(tmp_path):
    """It said 'schema = "evolve"', a key no pipeline file has (the pipeline file refuses it),
    and only 'evolve --model', where a pipeline's user has 'evolve --pipeline FILE'."""
    path = seeded(tmp_path / "l.sqlite", 3)
    with Source(path) as src, pytest.raises(SchemaMismatchError) as err:
        src.topic("readings", ReadingV2, dedup=("sensor",))
    message = str(err.value)
    assert "schema_changes = \"evolve\"" in message and "schema = " not in message
    assert "'minikafka evolve readings --pipeline FILE'" in message and "--model module:Class" in message


def test_topic_evolve_true_adds_the_fields_on_the_fly(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 3)
    with Source(path) as src:
        t = src.topic("readings", ReadingV2, dedup=("sensor",), evolve=True)
        assert t.count() == 3 and "unit" in columns(path)
        again = src.topic("readings", ReadingV2, dedup=("sensor",), evolve=True)  # nothing left to do
        assert again.count() == 3


def test_old_code_reads_and_appends_an_evolved_topic(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 3)
    with Source(path) as src:
        src.evolve("readings", ReadingV2)
        src.topic("readings", ReadingV2, dedup=("sensor",)).append(
            {"sensor": "v2", "value": 9, "unit": "C", "calibrated": True})
    with Source(path) as old:  # a process still on the old model
        t = old.topic("readings", Reading, dedup=("sensor",))
        assert [r.sensor for r in t.iter_new()] == ["s0", "s1", "s2", "v2"]
        t.append({"sensor": "old", "value": 1})
    with Source(path) as new:
        rows = {r.sensor: r for r in new.topic("readings", ReadingV2, dedup=("sensor",)).iter_new()}
        assert rows["v2"].unit == "C" and rows["v2"].calibrated is True
        assert rows["old"].unit is None and rows["old"].calibrated is False


def test_retype_dry_run_says_which_fields_and_how_many_rows_it_rewrites(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 7)
    with Source(path) as src:
        plan = src.evolve("readings", ReadingRetyped, dry_run=True)
        assert plan.kind == "rewrite" and plan.rows == 7
        text = "\n".join(plan.describe())
        assert "field 'value' retyped" in text and "'INTEGER'" in text and "'REAL'" in text
        assert "rewrites all 7 row(s)" in text
        with pytest.raises(SchemaMismatchError, match="field 'value' retyped"):
            src.evolve("readings", ReadingRetyped)
    assert "unit" not in columns(path)


def test_a_required_new_field_is_refused_naming_the_field(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 2)
    with Source(path) as src:
        plan = src.evolve("readings", ReadingRequired, dry_run=True)
        assert plan.kind == "rewrite"
        assert "field 'unit' added: it is required and has no default" in plan.describe()[0]
        with pytest.raises(SchemaMismatchError, match="field 'unit' added"):
            src.evolve("readings", ReadingRequired)


def test_removing_a_field_is_a_rewrite(tmp_path):
    class Fewer(BaseModel):
        sensor: str

    path = seeded(tmp_path / "l.sqlite", 2)
    with Source(path) as src:
        plan = src.evolve("readings", Fewer, dry_run=True)
        assert plan.kind == "rewrite" and "field 'value' removed" in plan.describe()


def test_evolving_a_keyed_table_keeps_its_current_rows_and_upserts(tmp_path):
    path = str(tmp_path / "k.sqlite")
    with Source(path) as src:
        src.table("state", Reading, key="sensor").upsert_many([{"sensor": "a", "value": 1}, {"sensor": "b", "value": 2}])
        src.evolve("state", ReadingV2)
        t = src.table("state", ReadingV2, key="sensor")
        t.upsert({"sensor": "a", "value": 3, "unit": "C"})
        current = {r.sensor: r for r in t.iter_current()}
        assert current["a"].value == 3 and current["a"].unit == "C" and current["b"].unit is None
        view = src.ledger.conn.execute('SELECT "sensor", "unit" FROM "state:current" ORDER BY 1').fetchall()
        assert view == [("a", "C"), ("b", None)]


def test_the_status_view_shows_the_new_column(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 1)
    with Source(path) as src:
        src.evolve("readings", ReadingV2)
        cur = src.ledger.conn.execute('SELECT * FROM "readings:status"')
        assert {"unit", "calibrated", "seen_at", "_status"} <= {d[0] for d in cur.description}


CHILD_EVOLVE = """
import sys
from minikafka import Source
from tests.ledger.evolve_models import ReadingV2
with Source(sys.argv[1]) as src:
    src.evolve("readings", ReadingV2)
print("EVOLVED", flush=True)
"""


def _env(**extra):
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **extra}


@pytest.mark.parametrize("point", ["evolve:column-added", "evolve:catalog-updated"])
def test_a_crash_mid_evolve_leaves_the_old_schema(tmp_path, point):
    path = seeded(tmp_path / "l.sqlite", 1000)
    proc = subprocess.Popen([sys.executable, "-c", CHILD_EVOLVE, path], cwd=REPO, stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=_env(MINIKAFKA_FREEZE_AT=point), text=True)
    try:
        line = proc.stderr.readline()
        assert line.strip() == f"FROZEN {point}", line + proc.stderr.read()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert "unit" not in columns(path)
    with Source(path) as src:
        t = src.topic("readings", Reading, dedup=("sensor",))  # the old model still matches exactly
        assert t.count() == 1000
        assert src.ledger.conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        assert src.evolve("readings", ReadingV2).kind == "additive"  # and the evolve can be done again


CHILD_APPEND = """
import sys
from minikafka import Source
from tests.ledger.evolve_models import Reading
with Source(sys.argv[1]) as src:
    t = src.topic("readings", Reading, dedup=("sensor",))
    print("READY", flush=True)
    for i in range(int(sys.argv[2])):
        t.append({"sensor": f"w{i}", "value": i})
print("DONE", flush=True)
"""


def test_a_process_appending_while_another_evolves_loses_no_row(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 10)
    writer = subprocess.Popen([sys.executable, "-c", CHILD_APPEND, path, "300"], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), text=True)
    assert writer.stdout.readline().strip() == "READY"
    evolver = subprocess.run([sys.executable, "-c", CHILD_EVOLVE, path], cwd=REPO, capture_output=True,
                             env=_env(), text=True, timeout=60)
    assert evolver.returncode == 0, evolver.stderr
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0 and "DONE" in out, err
    with Source(path) as src:
        t = src.topic("readings", ReadingV2, dedup=("sensor",))
        rows = list(t.iter_new())
        assert len(rows) == 310 and all(r.unit is None for r in rows)


def test_compare_calls_an_older_model_older_and_the_same_model_same(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 1)
    with Source(path) as src:
        src.evolve("readings", ReadingV2)
        assert src.evolve("readings", Reading, dry_run=True).kind == evolution.OLDER
        assert src.evolve("readings", ReadingV2, dry_run=True).kind == evolution.SAME


def test_python_append_drops_an_unknown_field_with_one_warning_naming_it(tmp_path, caplog):
    with Source(str(tmp_path / "l.sqlite")) as src:
        t = src.topic("readings", Reading, dedup=("sensor",))
        t.append({"sensor": "a", "value": 1, "colour": "red"})
        t.extend([{"sensor": "b", "value": 2, "colour": "blue"}, {"sensor": "c", "value": 3}])
        assert t.count() == 3
    warned = [r.getMessage() for r in caplog.records if "dropped unknown field" in r.getMessage()]
    assert len(warned) == 1 and "'colour' (1 row)" in warned[0] and 'unknown_fields = "drop"' in warned[0]


def test_python_append_with_unknown_fields_quarantine_refuses_naming_the_field(tmp_path):
    from minikafka import UnknownFieldError

    with Source(str(tmp_path / "l.sqlite")) as src:
        t = src.topic("readings", Reading, dedup=("sensor",), unknown_fields="quarantine")
        with pytest.raises(UnknownFieldError, match="unknown field 'colour'"):
            t.append({"sensor": "a", "value": 1, "colour": "red"})
        with pytest.raises(UnknownFieldError, match="row 1: unknown field 'colour'"):
            t.extend([{"sensor": "b", "value": 2}, {"sensor": "c", "value": 3, "colour": "blue"}])
        t.append(Reading(sensor="d", value=4))  # a model instance carries no unknown field
        assert t.count() == 1


def test_unknown_fields_evolve_needs_a_model_that_takes_extra_fields(tmp_path):
    from minikafka import InvalidSettingError

    with Source(str(tmp_path / "l.sqlite")) as src:
        with pytest.raises(InvalidSettingError, match='needs a model with extra="allow"'):
            src.topic("readings", Reading, dedup=("sensor",), unknown_fields="evolve")
        assert "readings" not in src.topics() if hasattr(src, "topics") else True
        with pytest.raises(InvalidSettingError, match="unknown_fields must be one of"):
            src.topic("readings", Reading, dedup=("sensor",), unknown_fields="ignore")


def test_unknown_fields_evolve_keeps_a_new_field_in_a_column_of_its_own(tmp_path):
    from tests.ledger.evolve_models import ReadingOpen

    path = str(tmp_path / "l.sqlite")
    with Source(path) as src:
        t = src.topic("readings", ReadingOpen, dedup=("sensor",), unknown_fields="evolve")
        t.append({"sensor": "a", "value": 1})
        t.append({"sensor": "b", "value": 2, "colour": "red"})
        t.extend([{"sensor": "c", "value": 3, "tags": ["x"]}])
        with pytest.raises(Exception, match="field 'colour': 5 is not a str"):
            t.append({"sensor": "d", "value": 4, "colour": 5})
    assert columns(path)[-2:] == ["colour", "tags"]
    with Source(path) as src:  # reopened: the kept fields read back as the model's extras
        rows = {r.sensor: r.model_dump() for r in src.topic("readings", ReadingOpen, dedup=("sensor",)).iter_new()}
        assert rows["a"] == {"sensor": "a", "value": 1, "colour": None, "tags": None}
        assert rows["b"]["colour"] == "red" and rows["c"]["tags"] == ["x"]
        assert "colour" in src.layout("readings").field_names  # Spark reads the stored layout: the column too


def test_a_rolled_back_append_takes_its_kept_column_back_out(tmp_path):
    from minikafka import DuplicateMessageError
    from tests.ledger.evolve_models import ReadingOpen

    path = str(tmp_path / "l.sqlite")
    with Source(path) as src:
        t = src.topic("readings", ReadingOpen, dedup=("sensor",), unknown_fields="evolve")
        t.append({"sensor": "a", "value": 1})
        with pytest.raises(DuplicateMessageError):
            t.extend([{"sensor": "b", "value": 2, "colour": "red"}, {"sensor": "a", "value": 1}])
        assert "colour" not in columns(path) and "colour" not in t.layout.field_names
        t.append({"sensor": "c", "value": 3})
        assert t.count() == 2


def test_an_evolve_leaves_a_row_in_the_run_log_naming_the_fields(tmp_path):
    path = seeded(tmp_path / "l.sqlite", 1)
    with Source(path) as src:
        src.evolve("readings", ReadingV2)
        (run,) = [r for r in src.runs() if r["kind"] == "evolve"]
        assert run["status"] == "succeeded" and run["outputs"] == ["readings"]
        assert run["details"]["added"] == ["unit", "calibrated", "seen_at"]


@pytest.mark.slow
def test_adding_optional_fields_to_10m_rows_takes_under_a_second(tmp_path):
    """The figure of scripts/bench_evolve.py (10M rows built by one recursive insert)."""
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_evolve.py"), "--rows", "10000000"],
                         cwd=REPO, capture_output=True, text=True, env=_env(TMPDIR=str(tmp_path)), timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "target < 1.0 s   ok" in out.stdout

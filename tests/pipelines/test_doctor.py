"""doctor: what the set-up checks find, each with what to change."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from minikafka import Source
from minikafka.ledger.files import backup
from minikafka.pipelines.definition import load_pipeline
from minikafka.pipelines.doctor import doctor_checks
from tests.cli.helpers import damage_table_root

PIPELINE = """
[pipeline]
source = "ledger.sqlite"
master = "{master}"

[spark]
staging = "{staging}"

[health]
backups = "backups"

[topics.a]
model = "tests.cli.helpers:Item"

[topics.b]
model = "tests.cli.helpers:Item"

[[stages]]
name = "copy"
job = "jobs.score"
inputs = ["a"]
outputs = ["b"]
freshness = "26h"
"""


def _pipeline(tmp_path, *, master="local[2]", staging="local"):
    path = tmp_path / "p.toml"
    path.write_text(PIPELINE.format(master=master, staging=staging))
    Source(str(tmp_path / "ledger.sqlite")).close()
    return load_pipeline(path, check_jobs=False)


def _by_name(checks):
    return {c.name: c for c in checks}


def test_a_snapshot_older_than_the_pipelines_freshness_fails_with_what_to_do(tmp_path):
    pipeline = _pipeline(tmp_path)
    taken = datetime(2030, 1, 1, tzinfo=timezone.utc)
    backup(pipeline.source, tmp_path / "backups", clock=lambda: taken)
    fresh = _by_name(doctor_checks(pipeline.source, pipeline, now=taken + timedelta(hours=25)))["backups"]
    stale = _by_name(doctor_checks(pipeline.source, pipeline, now=taken + timedelta(hours=27)))["backups"]
    assert fresh.state == "ok" and fresh.reason == "newest snapshot 25.0h old (limit 26h)"
    assert stale.state == "fail"
    assert "older than the pipeline's freshness (26h)" in stale.reason and "minikafka backup" in stale.reason


def test_the_disk_check_counts_the_next_backfill(tmp_path):
    pipeline = _pipeline(tmp_path)
    dump = tmp_path / "dumps"
    dump.mkdir()
    (dump / "a.jsonl").write_bytes(b"x" * 1000)
    (dump / "b.jsonl").write_bytes(b"y" * 500)
    disk = _by_name(doctor_checks(pipeline.source, pipeline, backfill=[dump]))["disk space"]
    assert disk.numbers["backfill_bytes"] == 1500
    assert disk.numbers["need_bytes"] == disk.numbers["ledger_bytes"] + 3000


def test_a_non_local_master_needs_a_staging_location_every_node_sees(tmp_path):
    missing = _by_name(doctor_checks(tmp_path / "ledger.sqlite", _pipeline(
        tmp_path, master="spark://10.0.0.1:7077", staging=str(tmp_path / "nowhere"))))["staging"]
    assert missing.state == "fail" and "does not exist" in missing.reason
    (tmp_path / "shared").mkdir()
    there = _by_name(doctor_checks(tmp_path / "ledger.sqlite", _pipeline(
        tmp_path, master="spark://10.0.0.1:7077", staging=str(tmp_path / "shared"))))["staging"]
    assert there.state == "ok" and "every node must see it" in there.reason


def test_a_missing_ledger_is_one_failing_check_and_the_rest_still_run(tmp_path):
    checks = doctor_checks(tmp_path / "absent.sqlite")
    assert checks[0].name == "ledger" and checks[0].state == "fail"
    assert "java" in _by_name(checks)


def test_doctor_fails_a_ledger_that_fails_quick_check(tmp_path):
    from tests.cli.helpers import Item

    pipeline = _pipeline(tmp_path)
    with Source(str(pipeline.source)) as source:
        source.topic("a", Item, dedup=None).extend([{"title": "t" * 300, "url": f"u{i}", "score": 1.0} for i in range(200)])
    assert _by_name(doctor_checks(pipeline.source, pipeline))["ledger integrity"].state == "ok"
    damage_table_root(pipeline.source, "a")
    found = _by_name(doctor_checks(pipeline.source, pipeline))["ledger integrity"]
    assert found.state == "fail" and "PRAGMA quick_check" in found.reason and "restore" in found.reason


def test_doctor_fails_a_stage_whose_job_module_does_not_exist(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(PIPELINE.format(master="local[2]", staging="local").replace('job = "jobs.score"',
                                                                              'job = "jobs.no_such_job"'))
    Source(str(tmp_path / "ledger.sqlite")).close()
    found = _by_name(doctor_checks(tmp_path / "ledger.sqlite", load_pipeline(path, check_jobs=False)))
    assert found["stage copy job"].state == "fail" and "jobs.no_such_job" in found["stage copy job"].reason
    fine = _by_name(doctor_checks(tmp_path / "ledger.sqlite", _pipeline(tmp_path)))["stage copy job"]
    assert fine.state == "ok"


def test_doctor_fails_java_when_java_home_points_nowhere_though_java_is_on_path(tmp_path, monkeypatch):
    import shutil

    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    java = _by_name(doctor_checks(tmp_path / "absent.sqlite"))["java"]
    assert java.state == "fail" and "JAVA_HOME" in java.reason and str(tmp_path / "no-jdk") in java.reason

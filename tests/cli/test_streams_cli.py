"""The retention and watch commands, through the real entry point (no JVM needed here)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone

from minikafka import Source
from tests.pipelines.helpers import ROOT, homelab_copy


def cli(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "minikafka.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)


def test_retention_command_deletes_expired_handled_rows(db_path):
    from minikafka.util.clock import ManualClock, use_clock

    with use_clock(ManualClock(datetime.now(timezone.utc) - timedelta(days=2))):
        with Source(db_path) as source:
            stream = source.stream("events", max_age="1d")
            stream.extend([{"i": i} for i in range(5)])
            source.streaming("events", lambda w: None, consumer="c", size=1, until_idle=True)
    out = cli("retention", "--source", db_path)
    assert out.returncode == 0 and "events: 4 row(s) deleted" in out.stdout
    with Source(db_path) as source:
        assert source.stream("events").count() == 1


def test_retention_command_says_when_no_topic_has_one(db_path):
    Source(db_path).close()
    out = cli("retention", "--source", db_path)
    assert out.returncode == 0 and "no topic has a retention" in out.stdout


def test_watch_with_an_unknown_trigger_key_exits_2_naming_it(tmp_path):
    path = homelab_copy(tmp_path, replace={'name = "score"\njob = "jobs.score"':
                                           'name = "score"\njob = "jobs.score"\ntrigger = { hourly = true }'})
    out = cli("watch", str(path), "--until-idle")
    assert out.returncode == 2
    assert "stages.score.trigger: unknown key 'hourly'" in out.stderr

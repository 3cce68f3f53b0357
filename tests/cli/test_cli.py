"""The minikafka command, run through its real entry point; then the file is checked."""

from __future__ import annotations

import json
import subprocess
import sys

from minikafka import Source
from tests.conftest import Video


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka.cli", *args], capture_output=True, text=True, timeout=60)


def seeded(db_path):
    with Source(db_path) as src:
        t = src.topic("videos", Video, dedup=("url",))
        t.extend([{"creator": "c", "url": f"u{i}", "length_seconds": i} for i in range(3)])
        t.consumer("clean")
        for rec in t.iter_new(records=True, consumer="clean"):
            rec.ack()


def test_topics_show_status_and_replay(db_path):
    seeded(db_path)
    out = cli("topics", "--source", db_path)
    assert out.returncode == 0 and "videos" in out.stdout and "clean" in out.stdout
    shown = cli("show", "videos", "--source", db_path, "--limit", "2")
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [r["url"] for r in rows] == ["u0", "u1"] and rows[0]["_status"] == "handled"
    replayed = cli("replay", "videos", "--consumer", "clean", "--from-id", "2", "--source", db_path)
    assert replayed.returncode == 0 and "2 row(s)" in replayed.stdout
    with Source(db_path) as src:
        assert src.topic("videos", Video, dedup=("url",)).count("new", consumer="clean") == 2
    assert cli("status", "--source", db_path).returncode == 0


def test_errors_exit_1_with_a_message(db_path):
    seeded(db_path)
    out = cli("show", "nope", "--source", db_path)
    assert out.returncode == 1 and "no topic 'nope'" in out.stderr
    out = cli("replay", "videos", "--consumer", "ghost", "--source", db_path)
    assert out.returncode == 1 and "ghost" in out.stderr

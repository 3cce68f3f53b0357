"""A reader closing standard output early (| head -1) ends a command quietly with exit 0;
show --limit 0 prints every row (also with --follow), a negative --limit is a usage error."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.cli.helpers import invoke, seed


def test_show_into_a_pipe_closed_early_exits_0_without_a_message(db_path):
    seed(db_path, n=3000)  # far more than a pipe buffer holds
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "show", "items", "--limit", "0",
                             "--source", db_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    first = proc.stdout.readline()
    proc.stdout.close()  # what head -1 does
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    assert json.loads(first)["url"] == "u0"
    assert err == b""


def test_export_to_standard_output_closed_early_exits_0_without_a_message(db_path):
    seed(db_path, n=3000)
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "export", "items", "--format", "jsonl", "-",
                             "--source", db_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    assert b"Traceback" not in err and b"Error" not in err


def test_show_limit_0_prints_every_row(db_path):
    seed(db_path, n=12)
    out = invoke("show", "items", "--limit", "0", "--source", db_path)
    assert out.exit_code == 0
    assert [json.loads(line)["_id"] for line in out.output.splitlines()] == list(range(1, 13))


def test_show_negative_limit_is_a_usage_error(db_path):
    seed(db_path, n=2)
    out = invoke("show", "items", "--limit", "-1", "--source", db_path)
    assert out.exit_code == 2 and "--limit" in out.output


def test_show_follow_with_limit_0_starts_with_every_row(db_path):
    seed(db_path, n=3)
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.cli", "show", "items", "--follow", "--limit", "0",
                             "--interval", "0.05", "--source", db_path], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert [json.loads(proc.stdout.readline())["url"] for _ in range(3)] == ["u0", "u1", "u2"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)

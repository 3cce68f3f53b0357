"""``minikafka ui`` as a command: what it refuses before it serves, and a clean stop on SIGTERM."""

from __future__ import annotations

import httpx
import pytest
from click.testing import CliRunner

from minikafka import Source
from minikafka.cli import main

pytest.importorskip("uvicorn")


def test_a_host_other_machines_reach_needs_allow_remote(tmp_path):
    Source(tmp_path / "l.sqlite").close()
    result = CliRunner().invoke(main, ["ui", "--source", str(tmp_path / "l.sqlite"), "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "--allow-remote" in result.output and "Traceback" not in result.output


def test_a_missing_ledger_stops_the_command_with_one_line_naming_it(tmp_path):
    result = CliRunner().invoke(main, ["ui", "--source", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 1
    assert "none.sqlite" in result.output and "Traceback" not in result.output


def test_the_console_serves_the_url_it_prints_and_stops_on_sigterm(tmp_path, start_console):
    (tmp_path / "data").mkdir()
    Source(tmp_path / "data" / "l.sqlite").close()
    console = start_console(tmp_path / "data" / "l.sqlite")
    assert console.url.startswith("http://127.0.0.1:")
    page = httpx.get(console.url + "/topics")
    assert page.status_code == 200 and "no topics" in page.text
    assert page.headers["x-frame-options"] == "DENY"
    output = console.stop()
    assert console.proc.returncode == 0, output
    assert "console stopped" in output


def test_a_remote_host_with_allow_remote_warns_and_the_auth_token_guards_every_request(tmp_path, start_console):
    (tmp_path / "data").mkdir()
    Source(tmp_path / "data" / "l.sqlite").close()
    console = start_console(tmp_path / "data" / "l.sqlite", "--host", "0.0.0.0", "--allow-remote",
                            "--auth-token", "tok-5551234")
    assert any("warning" in line and "0.0.0.0" in line for line in console.before), console.before
    assert httpx.get(console.url + "/topics").status_code == 401
    page = httpx.get(console.url + "/topics", headers={"authorization": "Bearer tok-5551234"})
    assert page.status_code == 200 and "tok-5551234" not in page.text

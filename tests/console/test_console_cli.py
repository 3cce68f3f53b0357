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


def test_pipelines_on_different_ledgers_are_a_usage_error(tmp_path):
    from ..pipelines.helpers import homelab_copy

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = homelab_copy(tmp_path / "a"), homelab_copy(tmp_path / "b")
    Source(tmp_path / "a" / "homelab.sqlite").close()
    result = CliRunner().invoke(main, ["ui", "--pipeline", str(first), "--pipeline", str(second)])
    assert result.exit_code == 2, result.output
    assert "different ledgers" in result.output and "--source" in result.output


def test_every_pipeline_given_is_drawn_on_the_overview(tmp_path):
    import warnings

    from minikafka.console.app import create_app
    from minikafka.pipelines.definition import load_pipeline

    from ..pipelines.helpers import homelab_copy

    nightly = homelab_copy(tmp_path)
    weekly = tmp_path / "weekly.toml"
    weekly.write_text(nightly.read_text().replace('name = "homelab"', 'name = "weekly"'))
    Source(tmp_path / "homelab.sqlite").close()
    defns = [load_pipeline(p, suites=False) for p in (nightly, weekly)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    with TestClient(create_app(tmp_path / "homelab.sqlite", pipelines=defns), base_url="http://127.0.0.1") as c:
        page = c.get("/").text
    assert "<h2>Pipeline homelab</h2>" in page and "<h2>Pipeline weekly</h2>" in page
    assert page.count('class="node stage" data-name="score"') == 2


def test_the_event_stream_says_change_when_another_process_commits(tmp_path, start_console):
    from pydantic import BaseModel

    class Note(BaseModel):
        text: str

    (tmp_path / "data").mkdir()
    Source(tmp_path / "data" / "l.sqlite").close()
    console = start_console(tmp_path / "data" / "l.sqlite")
    with httpx.stream("GET", console.url + "/events", timeout=10) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert next(lines) == "retry: 2000"
        with Source(tmp_path / "data" / "l.sqlite") as source:
            source.topic("notes", Note, dedup=None).append({"text": "hello"})
        assert any(line == "event: change" for line, _ in zip(lines, range(20)))

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


# -- issue 39: hosts, tokens, and a slow page ---------------------------------------------------------------
def _ledger(tmp_path):
    (tmp_path / "data").mkdir()
    Source(tmp_path / "data" / "l.sqlite").close()
    return tmp_path / "data" / "l.sqlite"


def test_allow_remote_without_a_token_or_allowed_hosts_is_refused(tmp_path):
    path = _ledger(tmp_path)
    result = CliRunner().invoke(main, ["ui", "--source", str(path), "--host", "0.0.0.0", "--allow-remote"])
    assert result.exit_code == 2, result.output
    assert "--auth-token" in result.output and "--allowed-host" in result.output and "Traceback" not in result.output


def test_allow_remote_with_allowed_hosts_answers_only_those_host_names(tmp_path, start_console):
    console = start_console(_ledger(tmp_path), "--host", "0.0.0.0", "--allow-remote", "--allowed-host",
                            "console.example")
    assert httpx.get(console.url + "/topics", headers={"host": "console.example"}).status_code == 200
    assert httpx.get(console.url + "/topics", headers={"host": "rebound.evil.example"}).status_code == 400


@pytest.mark.parametrize("how", ["option", "environment", "blank"])
def test_an_empty_auth_token_is_refused_not_taken_as_no_token(tmp_path, how):
    path = _ledger(tmp_path)
    args, env = ["ui", "--source", str(path)], {}
    if how == "option":
        args += ["--auth-token", ""]
    elif how == "environment":
        env["MINIKAFKA_UI_TOKEN"] = ""
    else:
        env["MINIKAFKA_UI_TOKEN"] = "   "
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 2, result.output
    assert "empty" in result.output and ("--auth-token" in result.output or "MINIKAFKA_UI_TOKEN" in result.output)


def test_a_loopback_host_other_than_127_0_0_1_serves_the_url_it_prints(tmp_path, start_console):
    console = start_console(_ledger(tmp_path), "--host", "127.0.0.2")
    assert console.url.startswith("http://127.0.0.2:")
    assert httpx.get(console.url + "/topics").status_code == 200


SLOW_ROWS = 200_000  # a quarantined payload of about 15 MB: its page takes seconds to build


@pytest.fixture(scope="module")
def slow_ledger(tmp_path_factory):
    """A ledger with one quarantined row so large its page takes seconds to build (pretty-print, mask, escape)."""
    import json

    from minikafka.ledger.consuming import Quarantined, quarantine_in_current_transaction

    path = _ledger(tmp_path_factory.mktemp("slow"))
    payload = json.dumps([{"title": f"row {i}", "url": f"https://example.com/{i}", "n": i} for i in range(SLOW_ROWS)])
    with Source(path) as source, source.ledger.atomic() as conn:
        quarantine_in_current_transaction(conn, [Quarantined("rss.items", payload, "too big", "dump.jsonl:1",
                                                             "2026-01-01T00:00:00.000000Z")])
    return path


def _start_slow_pages(console, n: int = 1, page: str = "/quarantine/1"):
    """GET a slow page ``n`` times at once, each in a thread; returns their results ('at' once answered)."""
    import threading
    import time

    results: list[dict] = [{} for _ in range(n)]

    def get(result):
        try:
            result["status"] = httpx.get(console.url + page, timeout=120).status_code
        except httpx.HTTPError as exc:
            result["error"] = repr(exc)
        result["at"] = time.monotonic()

    for result in results:
        threading.Thread(target=get, args=(result,), daemon=True).start()
    time.sleep(0.5)  # the requests reach the server (no clock to inject: a real socket and a real server)
    return results


def test_another_page_answers_while_a_slow_page_is_being_built(slow_ledger, start_console):
    import time

    console = start_console(slow_ledger)
    (slow,) = _start_slow_pages(console)
    asked = time.monotonic()
    other = httpx.get(console.url + "/topics", timeout=30)
    answered = time.monotonic()
    assert other.status_code == 200
    assert answered - asked < 3, answered - asked
    assert "at" not in slow or slow["at"] > answered, "the slow page was not slow: no proof here"


def test_sigterm_stops_the_console_within_seconds_while_a_page_waits_on_the_ledger(tmp_path, start_console):
    """A page waiting on a ledger another process holds (exclusive lock: it waits up to READ_BUSY_S) is
    abandoned on SIGTERM: the console is gone before that page would have answered (the server used to
    wait for every page in flight, up to the 30 s busy timeout)."""
    import signal
    import sqlite3
    import time

    from minikafka.console.app import READ_BUSY_S

    path = _ledger(tmp_path)
    console = start_console(path)
    holder = sqlite3.connect(path)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        asked = time.monotonic()
        (slow,) = _start_slow_pages(console, 1, "/topics")
        assert "at" not in slow, "the page did not wait: no proof here"
        console.proc.send_signal(signal.SIGTERM)
        console.proc.wait(timeout=60)
        gone = time.monotonic()
    finally:
        holder.rollback()
        holder.close()
    assert console.proc.returncode == 0
    assert gone - asked < READ_BUSY_S, f"the console stopped {gone - asked:.1f} s after the page was asked for"
    assert slow.get("status") != 503  # the page never finished waiting


def test_a_stages_lookup_is_a_dashed_edge_from_its_topic_on_the_overview_graph(tmp_path):
    import re
    import warnings

    from minikafka.console.app import create_app
    from minikafka.pipelines.definition import load_pipeline

    from ..pipelines.helpers import homelab_copy

    conf = homelab_copy(tmp_path)
    text = conf.read_text()
    score = text.index('name = "score"')
    end = text.index('outputs = ["rss.scored"]', score)
    conf.write_text(text[:end] + 'lookups = ["rss.feed_day"]\n' + text[end:])
    Source(tmp_path / "homelab.sqlite").close()
    defn = load_pipeline(conf, suites=False)
    assert defn.stage("score").lookups == ["rss.feed_day"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    with TestClient(create_app(tmp_path / "homelab.sqlite", pipelines=[defn]), base_url="http://127.0.0.1") as c:
        page = c.get("/").text
    svg = page[page.index('<svg xmlns="http://www.w3.org/2000/svg" class="dag"'):]
    svg = svg[: svg.index("</svg>")]
    dashed = re.findall(r'<path d="M ([\d.]+) ([\d.]+) C [^"]*, ([\d.]+) ([\d.]+)"[^>]*class="edge lookup"', svg)
    assert len(dashed) == 1, svg
    node = {name: (int(x), int(y)) for name, x, y in re.findall(
        r'data-name="([^"]+)"><rect x="(\d+)" y="(\d+)"', svg)}
    x1, y1, x2, y2 = (float(v) for v in dashed[0])
    # from the right side of the looked-up table to the left side of the stage that reads it
    assert (x1, y1) == (node["rss.feed_day"][0] + 132, node["rss.feed_day"][1] + 22)
    assert (x2, y2) == (node["score"][0], node["score"][1] + 22)
    assert node["rss.feed_day"][0] < node["score"][0]
    assert svg.count('class="edge lookup"') == 1 and svg.count('class="edge"') == sum(
        len(s.inputs) + len(s.outputs) for s in defn.stages)

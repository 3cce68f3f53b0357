"""The console under attack and misuse (issue 39): overflowing numbers, names no topic can have,
runs whose outputs are not topics, non-ASCII credentials, open redirects, a mistyped group, a
ledger held by another process, and a fuzz of every route: never a 500."""

from __future__ import annotations

import functools
import re
import sqlite3
import subprocess
import sys
import time
import warnings
from urllib.parse import quote

import pytest

pytest.importorskip("starlette")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient  # noqa: E402

from minikafka import Source  # noqa: E402
from minikafka.console import actions  # noqa: E402
from minikafka.console.app import create_app  # noqa: E402
from minikafka.ledger.consuming import (
    consumer_info,  # noqa: E402
    read_runs,  # noqa: E402
)

from .ledgers import small_ledger  # noqa: E402

TOKEN = "console-tok-5551234"
HUGE = "9223372036854775808"  # 2**63: one past SQLite's INTEGER
HUGE_NEGATIVE = "-99999999999999999999999"


@pytest.fixture
def ledger(tmp_path):
    return small_ledger(tmp_path / "small.sqlite")


def client(path, **kwargs) -> TestClient:
    return TestClient(create_app(path, **kwargs), base_url="http://127.0.0.1", raise_server_exceptions=False)


def csrf(c: TestClient, action: str = "pause") -> str:
    return re.search(r'name="csrf" value="([^"]+)"', c.get(f"/actions/{action}").text).group(1)


def console_runs(path) -> list[dict]:
    """The run log's rows of console actions, newest first."""
    with Source(path, read_only=True) as source:
        return [r for r in read_runs(source.ledger.conn, limit=100) if r["kind"] == "console"]


# -- 1. numbers past 64 bits ---------------------------------------------------------------------
@pytest.mark.parametrize("page, names", [
    (f"/topics/rss.items?after={HUGE}", "after"),
    (f"/topics/rss.items?before={HUGE_NEGATIVE}", "before"),
    (f"/quarantine?below={HUGE}", "below"),
    ("/quarantine/99999999999999999999999", "quarantine id"),
    (f"/topics/rss.items?after={'9' * 5000}", "after"),
])
def test_a_number_past_64_bits_is_a_400_naming_the_parameter_not_a_500(ledger, page, names):
    with client(ledger) as c:
        response = c.get(page)
    assert response.status_code == 400, response.text[-400:]
    assert names in response.text and "9" * 100 not in response.text


@pytest.mark.parametrize("action, form", [
    ("requeue", {"topic": "rss.items", "ids": f"1 {HUGE}"}),
    ("replay", {"topic": "rss.items", "consumer": "split_youtube", "from_id": HUGE_NEGATIVE}),
    ("replay", {"topic": "rss.items", "consumer": "split_youtube", "to_id": HUGE}),
    ("retry", {"queue": "jobs.summarise", "ids": HUGE}),
    ("seek", {"group": "dashboard", "topic": "rss.items", "offset": HUGE}),
])
def test_an_action_with_a_number_past_64_bits_is_a_400_and_a_failed_run_row(ledger, action, form):
    with client(ledger, allow_actions=True) as c:
        response = c.post(f"/actions/{action}", data={**form, "csrf": csrf(c)})
    assert response.status_code == 400, response.text[-400:]
    (run,) = console_runs(ledger)
    assert run["status"] == "failed" and run["details"]["action"] == action
    assert "refused" in run["error"] and "whole number" in run["error"]


# -- 2. names that break the naming rule ----------------------------------------------------------
@pytest.mark.parametrize("page", [
    "/topics/rss.items%20", "/topics/_minikafka_runs", "/topics/%3Cscript%3E", "/topics/" + "a" * 5000,
    "/quarantine?topic=%3Cx%3E", "/topics/nosuch",
])
def test_a_name_that_breaks_the_naming_rule_is_a_404_no_topic_like_an_unknown_one(ledger, page):
    with client(ledger) as c:
        response = c.get(page)
    assert response.status_code == 404, response.text[-400:]
    assert "no topic" in response.text and "<script>" not in response.text and "a" * 200 not in response.text


# -- 3. the page of a backup run and of a delivery run ------------------------------------------------
def test_the_page_of_a_real_backup_run_and_a_real_delivery_run_answers_200(tmp_path):
    from tests.connectors.scripted_server import ScriptedServer
    from tests.connectors.test_delivery import deliveries_file, fill

    db = tmp_path / "ledger.sqlite"
    fill(str(db), 4)
    cli = [sys.executable, "-m", "minikafka.cli"]
    backup = subprocess.run([*cli, "backup", str(tmp_path / "snapshots"), "--source", str(db)],
                            capture_output=True, text=True, cwd=tmp_path)
    assert backup.returncode == 0, backup.stderr
    with ScriptedServer([200]) as server:
        deliver = subprocess.run([*cli, "deliver", str(deliveries_file(tmp_path, server.url)), "--once"],
                                 capture_output=True, text=True, cwd=tmp_path)
    assert deliver.returncode == 0, deliver.stderr
    with Source(db, read_only=True) as source:
        runs = {r["kind"]: r for r in source.runs(limit=20)}
    assert {"backup", "delivery"} <= set(runs)
    with client(db) as c:
        for kind in ("backup", "delivery"):
            page = c.get(f"/runs/{runs[kind]['run_id']}")
            assert page.status_code == 200, (kind, page.text[-400:])
            assert f'href="/topics/{quote(runs[kind]["outputs"][0], safe="")}"' not in page.text
        assert str(tmp_path / "snapshots") in c.get(f"/runs/{runs['backup']['run_id']}").text
        assert c.get("/runs").status_code == 200 and c.get("/").status_code == 200


# -- 7. non-ASCII credentials ------------------------------------------------------------------------
def test_a_non_ascii_token_bearer_cookie_or_csrf_field_is_a_4xx_not_a_500(ledger):
    with client(ledger, auth_token=TOKEN) as c:
        assert c.get("/?token=%C3%A9t%C3%A9").status_code == 401
        assert c.get("/", headers={"authorization": "Bearer été".encode()}).status_code == 401
        assert c.get("/", headers={"cookie": "minikafka_console=été".encode()}).status_code == 401
        assert c.get("/events", headers={"authorization": "Bearer ü".encode()}).status_code == 401
    with client(ledger, allow_actions=True, auth_token=TOKEN) as c:
        c.get(f"/?token={TOKEN}")
        refused = c.post("/actions/pause", content=b"schedule=hourly-digest&csrf=%C3%A9t%C3%A9",
                         headers={"content-type": "application/x-www-form-urlencoded"})
        assert refused.status_code == 403, refused.text[-300:]


# -- the mediocre findings -----------------------------------------------------------------------------
@pytest.mark.parametrize("back", ["//evil.example/x", "/\\evil.example", "https://evil.example/", "/%0d%0aSet-Cookie",
                                  "javascript:alert(1)", "/elsewhere/x"])
def test_a_back_link_that_leaves_this_console_becomes_the_overview(ledger, back):
    with client(ledger, allow_actions=True) as c:
        page = c.get("/actions/pause", params={"schedule": "hourly-digest", "back": back})
        done = c.post("/actions/pause", data={"schedule": "hourly-digest", "back": back, "csrf": csrf(c)})
    assert 'name="back" value="/"' in page.text and 'href="/">No, go back' in page.text
    assert 'href="/" id="back"' in done.text
    assert "evil.example" not in done.text


def test_a_back_link_inside_this_console_is_kept(ledger):
    with client(ledger, allow_actions=True) as c:
        page = c.get("/actions/pause", params={"schedule": "hourly-digest", "back": "/schedules?x=1"})
    assert 'name="back" value="/schedules?x=1"' in page.text


def test_seek_on_a_mistyped_group_is_a_404_and_creates_no_group(ledger):
    with client(ledger, allow_actions=True) as c:
        response = c.post("/actions/seek", data={"group": "dashbaord", "topic": "rss.items", "offset": "2",
                                                 "csrf": csrf(c)})
        moved = c.post("/actions/seek", data={"group": "dashboard", "topic": "rss.items", "offset": "2",
                                              "csrf": csrf(c)})
    assert response.status_code == 404 and "dashbaord" in response.text
    assert moved.status_code == 200, moved.text[-400:]
    with Source(ledger, read_only=True) as source:
        assert "dashbaord" not in {c.name for c in consumer_info(source.ledger.conn, with_lag=False)}
    assert [r["status"] for r in console_runs(ledger)] == ["succeeded", "failed"]


def test_a_ledger_held_in_exclusive_locking_mode_is_a_busy_page_within_seconds(ledger):
    holder = sqlite3.connect(ledger)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with client(ledger) as c:
            started = time.monotonic()
            response = c.get("/topics")
            waited = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
    assert response.status_code == 503, response.text[-400:]
    assert "busy" in response.text and "damaged" not in response.text
    assert waited < 8


# -- the fuzz: every route, every parameter, signed in or not ----------------------------------------------
BAD = [HUGE, HUGE_NEGATIVE, "9" * 400, "rss.items ", "_minikafka_runs", "<script>alert(1)</script>", "x" * 2000,
       "été ✓ 日本", "\x00", "%", "../../etc/passwd", "//evil.example/x", "/\\evil.example", "1e309", "-0", "",
       "' OR 1=1 --", "a=b", "_id>=" + HUGE]


def _query_names() -> list[str]:
    """Every query parameter a page reads (from the pages' source) and every action's field."""
    import inspect

    from minikafka.console import app

    text = inspect.getsource(app)
    names = {a or b for a, b in re.findall(r'(?:q|query_params)\.(?:get|getlist)\("(\w+)"|_int_param\(q, "(\w+)"', text)}
    names |= {f for a in actions.ACTIONS.values() for f in a.fields}
    return sorted(names | {"back", "token"})


def _routes(app) -> list[tuple[str, set[str]]]:
    from starlette.routing import Mount, Route

    out = []
    for route in app.routes:
        if isinstance(route, Route):
            out.append((route.path, set(route.methods or {"GET"})))
        elif isinstance(route, Mount):
            out.append((route.path + "/{path}", {"GET"}))
    return out


REAL = {"name": ["rss.items", "pause", "seek", "requeue"], "run_id": ["run-20260101T030000Z-secret00"],
        "qid": ["1"], "path": ["console.css"]}  # path values that reach a route's page (or action)
SHARP = [HUGE, "x" * 5000, "été ✓ 日本"]  # each parameter alone (BAD all at once covers the rest)


def _paths(template: str, values) -> list[tuple[str, bool]]:
    """The route's path with its parameter set to each value, and to the real names (flagged True)."""
    params = re.findall(r"{(\w+)(?::\w+)?}", template)
    if not params:
        return [(template, True)]
    out = []
    for value, real in [*((v, False) for v in values), *((v, True) for v in REAL.get(params[0], []))]:
        out.append((re.sub(r"{\w+(?::\w+)?}", lambda _m, v=value: quote(v, safe=""), template), real))
    return out


def test_no_route_answers_500_to_overflowing_bad_non_ascii_or_oversized_input_signed_in_or_not(ledger):
    """Every route of the app (a new one is fuzzed without a change here): each path parameter set to
    each bad value, unsigned, with a non-ASCII token and signed in; on the real paths, every query
    parameter a page reads and every action field, alone (sharp values) and all at once (every value);
    POSTs with bad forms and bad CSRF fields."""
    app = create_app(ledger, allow_actions=True, auth_token=TOKEN)
    routes = _routes(app)
    assert {"/", "/topics/{name}", "/quarantine/{qid:int}", "/actions/{name}", "/static/{path}"} <= {
        p for p, _ in routes}
    names = _query_names()
    assert {"after", "before", "below", "topic", "where", "ids", "from_id", "group", "back"} <= set(names)
    signed = {"authorization": f"Bearer {TOKEN}"}
    answers = []
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
        token = re.search(r'name="csrf" value="([^"]+)"', c.get("/actions/pause", headers=signed).text).group(1)
        for template, methods in routes:
            for path, real in _paths(template, BAD):
                if path == "/events":  # a stream that stays open: its refusals only (signed in it answers 200)
                    answers += [c.get(path), c.get(path, headers={"authorization": "Bearer été".encode()})]
                    continue
                for method in sorted(methods - {"HEAD"}):
                    send = functools.partial(c.request, method, path)
                    answers += [send(), send(headers={"authorization": "Bearer été".encode()}),
                                send(headers={"cookie": "minikafka_console=été".encode()})]
                    if method == "GET":
                        answers += [send(headers=signed)]
                        if real:
                            answers += [send(params={n: v for n in names}, headers=signed) for v in BAD]
                            answers += [send(params={n: v}, headers=signed) for n in names for v in SHARP]
                    else:
                        forms = [{"csrf": v} for v in BAD]
                        if real:
                            forms += [{n: v for n in names} | {"csrf": token} for v in BAD]
                            forms += [{n: v, "csrf": token} for n in names for v in SHARP]
                        answers += [send(data=f, headers=signed) for f in forms]
    assert len(answers) > 1000
    for response in answers:
        assert response.status_code < 500, (response.request.method, str(response.request.url)[:300],
                                            response.text[-300:])
        assert "Traceback" not in response.text


@pytest.mark.parametrize("path", ["//evil.example/x", "/\\evil.example/x"])
def test_opening_the_token_link_on_a_path_that_names_another_site_redirects_to_the_overview(ledger, path):
    with client(ledger, auth_token=TOKEN) as c:
        opened = c.get(f"http://127.0.0.1{path}?token={TOKEN}", follow_redirects=False)
    location = opened.headers["location"]
    assert opened.status_code == 303 and location.startswith("/"), location
    assert not location.startswith("//") and "\\" not in location  # a browser would leave for evil.example

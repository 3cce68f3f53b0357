"""The console's pages and refusals without a browser (Starlette's TestClient, in process):
status codes, the pages a missing or damaged ledger, an unknown name or a bad filter get,
CSRF and read-only refusals, the auth token, and secrets kept off every page."""

from __future__ import annotations

import re
import sqlite3
import warnings

import pytest
from pydantic import BaseModel

pytest.importorskip("starlette")
with warnings.catch_warnings():  # starlette's note that a later httpx package will replace httpx here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient  # noqa: E402

from minikafka import Source  # noqa: E402
from minikafka.console.app import create_app  # noqa: E402
from minikafka.ledger.consuming import read_runs  # noqa: E402

from .ledgers import SECRETS, small_ledger  # noqa: E402

PAGES = ["/", "/runs", "/topics", "/topics/rss.items", "/quarantine", "/queues", "/schedules", "/groups"]


@pytest.fixture
def ledger(tmp_path):
    return small_ledger(tmp_path / "small.sqlite")


def client(path, **kwargs) -> TestClient:
    return TestClient(create_app(path, **kwargs), base_url="http://127.0.0.1")


def test_every_page_answers_200_and_names_no_secret(ledger):
    with client(ledger) as c:
        for page in PAGES + ["/runs/run-20260101T030000Z-secret00", "/quarantine/1", "/runs?stage=notify"]:
            response = c.get(page)
            assert response.status_code == 200, (page, response.text[:500])
            for secret in SECRETS:
                assert secret not in response.text, (page, secret)
        assert "llm.example" in c.get("/runs/run-20260101T030000Z-secret00").text  # the error is shown, redacted


def test_a_missing_ledger_is_a_404_page_that_names_it(tmp_path):
    with client(tmp_path / "gone.sqlite") as c:
        response = c.get("/topics")
    assert response.status_code == 404
    assert "gone.sqlite" in response.text and "Traceback" not in response.text


def test_a_damaged_ledger_is_a_409_page_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 200)
    with client(bad) as c:
        response = c.get("/")
    assert response.status_code == 409, response.text
    assert "bad.sqlite" in response.text and "Traceback" not in response.text


@pytest.mark.parametrize("page, status, says", [
    ("/topics/no.such.topic", 404, "no.such.topic"),
    ("/runs/run-nope", 404, "run-nope"),
    ("/quarantine/999", 404, "999"),
    ("/quarantine?topic=no.such.topic", 404, "no.such.topic"),
    ("/topics/rss.items?where=nosuchfield%3D1", 400, "nosuchfield"),
    ("/topics/rss.items?where=title", 400, "title"),
    ("/topics/rss.items?where=_id%3Dten", 400, "ten"),
    ("/topics/rss.items?after=ten", 400, "after is a row id"),
    ("/runs?status=happy", 400, "happy"),
    ("/queues?state=stuck", 400, "stuck"),
    ("/runs?since=yesterday", 400, "yesterday"),
    ("/no/such/page", 404, "no page"),
])
def test_a_bad_name_or_filter_gets_a_4xx_page_that_says_so(ledger, page, status, says):
    with client(ledger) as c:
        response = c.get(page)
    assert response.status_code == status, response.text[:400]
    assert says in response.text
    assert "Traceback" not in response.text and "<h1>" in response.text


def test_the_row_browser_pages_by_id_ranges_and_filters_on_fields(ledger):
    with client(ledger) as c:
        first = c.get("/topics/rss.items").text
        ids = [int(i) for i in re.findall(r'<tr data-id="(\d+)"', first)]
        assert ids == list(range(1, 51))
        assert 'href="/topics/rss.items?after=50"' in first and 'id="older"' not in first
        second = c.get("/topics/rss.items?after=50").text
        assert [int(i) for i in re.findall(r'<tr data-id="(\d+)"', second)] == list(range(51, 101))
        back = c.get("/topics/rss.items?before=51").text
        assert [int(i) for i in re.findall(r'<tr data-id="(\d+)"', back)] == ids
        lwn = c.get("/topics/rss.items", params={"where": ["feed=lwn.net", "_id>100"]}).text
        assert [int(i) for i in re.findall(r'<tr data-id="(\d+)"', lwn)] == list(range(101, 121, 2))
        # the consumer's own status per row: it acked the first 30
        row = re.search(r'<tr data-id="30">.*?</tr>', first, re.S).group(0)
        assert '<td class="handled">handled</td>' in row
        assert '<td class="new">new</td>' in re.search(r'<tr data-id="31">.*?</tr>', first, re.S).group(0)


def test_without_allow_actions_no_action_is_offered_and_a_forged_post_is_refused(ledger):
    with client(ledger) as c:
        for page in PAGES + ["/quarantine/1"]:
            assert "/actions/" not in c.get(page).text, page
        assert c.get("/actions/pause?schedule=hourly-digest").status_code == 403
        forged = c.post("/actions/pause", data={"schedule": "hourly-digest", "csrf": "guess"})
    assert forged.status_code == 403
    with Source(ledger, read_only=True) as source:
        assert source.scheduler().get("hourly-digest").paused is False
        assert read_runs(source.ledger.conn, stage="console") == []


def test_with_allow_actions_a_post_without_the_csrf_token_is_refused(ledger):
    with client(ledger, allow_actions=True) as c:
        confirm = c.get("/actions/pause?schedule=hourly-digest")
        assert confirm.status_code == 200 and 'name="csrf"' in confirm.text
        for token in (None, "forged"):
            data = {"schedule": "hourly-digest", **({"csrf": token} if token else {})}
            assert c.post("/actions/pause", data=data).status_code == 403
        token = re.search(r'name="csrf" value="([^"]+)"', confirm.text).group(1)
        done = c.post("/actions/pause", data={"schedule": "hourly-digest", "csrf": token},
                      headers={"user-agent": "pytest-agent/1"})
    assert done.status_code == 200, done.text
    with Source(ledger, read_only=True) as source:
        assert source.scheduler().get("hourly-digest").paused is True
        (run,) = [r for r in source.runs(limit=50) if r["kind"] == "console"]
    assert run["status"] == "succeeded"
    assert run["details"]["action"] == "pause" and run["details"]["user_agent"] == "pytest-agent/1"
    assert run["details"]["host"] == "testclient"


def test_an_action_with_bad_arguments_is_a_400_page_and_changes_nothing(ledger):
    with client(ledger, allow_actions=True) as c:
        token = re.search(r'name="csrf" value="([^"]+)"', c.get("/actions/cancel?queue=jobs.summarise").text).group(1)
        response = c.post("/actions/cancel", data={"queue": "jobs.summarise", "ids": "two", "csrf": token})
    assert response.status_code == 400 and "numbers" in response.text


def test_the_auth_token_is_required_on_every_request_and_never_shown(ledger):
    token = "console-token-xyz-123"
    with client(ledger, auth_token=token) as c:
        assert c.get("/").status_code == 401
        assert c.get("/static/console.css").status_code == 401
        assert c.get("/", headers={"authorization": f"Bearer {token}"}).status_code == 200
        opened = c.get(f"/topics?token={token}", follow_redirects=False)
        assert opened.status_code == 303 and opened.headers["location"] == "/topics"
        page = c.get("/topics")  # the cookie it set
    assert page.status_code == 200 and token not in page.text


def test_a_host_header_other_than_loopback_is_refused(ledger):
    with TestClient(create_app(ledger), base_url="http://evil.example") as c:
        assert c.get("/").status_code == 400


def test_no_page_holds_a_read_transaction_after_it_was_served(ledger):
    with client(ledger) as c:
        for page in PAGES:
            c.get(page)
    with sqlite3.connect(ledger) as conn:  # a checkpoint passes every frame only when no reader pins one
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0


def test_every_template_compiles():
    from minikafka.console.app import HERE, Console, _templates

    env = _templates(Console("unused.sqlite"))
    names = sorted(p.name for p in (HERE / "templates").glob("*.html"))
    assert len(names) >= 14
    for name in names:
        env.get_template(name)


def test_an_action_on_several_ids_takes_them_from_one_field_or_many(ledger):
    with client(ledger, allow_actions=True) as c:
        page = c.get("/actions/cancel", params={"queue": "jobs.summarise", "ids": ["3"]})
        token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        assert 'name="ids" value="3"' in page.text
        done = c.post("/actions/retry", data={"queue": "jobs.summarise", "ids": "1, 2", "csrf": token})
    assert done.status_code == 200, done.text
    assert "2 dead job(s) of jobs.summarise pending again" in done.text


def test_the_queue_page_filters_jobs_by_state(ledger):
    with client(ledger) as c:
        dead = c.get("/queues?state=dead").text
        everything = c.get("/queues").text
    assert re.findall(r'<tr data-job="(\d+)"', dead) == ["1", "2"]
    assert re.findall(r'<tr data-job="(\d+)"', everything) == ["1", "2", "3"]


class Hook(BaseModel):
    url: str
    api_key: str


def test_a_field_named_like_a_secret_and_a_runs_details_are_shown_masked(ledger):
    from minikafka.ledger.consuming import RunResult, write_run_in_current_transaction

    with Source(ledger) as source:
        source.topic("hooks", Hook, dedup=None).append({"url": "https://hooks.example/a", "api_key": "k-93847561"})
        run = RunResult("run-20260102T000000Z-details0", "delivery", inputs=["hooks"],
                        details={"endpoint": "https://svc:pa55word9@hooks.example/in?sig=s1g2n3d"})
        run.finish("succeeded")
        with source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, run)
    with client(ledger) as c:
        rows = c.get("/topics/hooks").text
        details = c.get("/runs/run-20260102T000000Z-details0").text
    assert "k-93847561" not in rows and "https://hooks.example/a" in rows and "***" in rows
    assert "pa55word9" not in details and "s1g2n3d" not in details and "hooks.example/in" in details


def test_a_delivery_in_flight_is_shown_with_its_last_error_redacted(ledger):
    from minikafka.ledger.consuming import deliveries
    from minikafka.ledger.topics import acks

    with Source(ledger) as source:
        with source.ledger.atomic() as conn:
            cid = acks.find_consumer(conn, "rss.items", "dashboard")
            deliveries.record_inflight_in_current_transaction(conn, cid, 0, 6, 10, 5, "2026-01-01T00:00:00.000000Z")
            deliveries.note_failed_attempt_in_current_transaction(
                conn, cid, 0, 2, "POST https://hook:s3cr3t-pw@hooks.example/in: 503", "2026-01-01T00:00:01.000000Z")
    with client(ledger) as c:
        page = c.get("/groups").text
    assert "HTTP deliveries in flight" in page and "hooks.example/in: 503" in page and "s3cr3t-pw" not in page


def _log_run(path, run_id: str, stage: str, status: str, started: str | None = None) -> None:
    from minikafka.ledger.consuming import RunResult, write_run_in_current_transaction

    with Source(path) as source:
        run = RunResult(run_id, "stage", stage=stage)
        run.started_at = started or run.started_at
        run.finish(status, None if status == "succeeded" else "it broke")
        with source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, run)


def test_a_failed_run_needs_attention_until_its_stage_succeeds_again(ledger):
    with client(ledger) as c:
        assert "run-20260101T030000Z-secret00" in c.get("/").text
        _log_run(ledger, "run-okay", "notify", "succeeded")  # started now: after the failed one
        assert "run-20260101T030000Z-secret00" not in c.get("/").text


def test_runs_filter_by_stage_status_and_day(ledger):
    _log_run(ledger, "run-a", "load", "succeeded", "2026-02-01T01:00:00.000000Z")
    _log_run(ledger, "run-b", "load", "failed", "2026-02-02T23:59:59.000000Z")
    _log_run(ledger, "run-c", "clean", "failed", "2026-02-03T00:00:00.000000Z")
    with client(ledger) as c:
        def shown(**params):
            return re.findall(r'<tr data-run="([^"]+)"', c.get("/runs", params=params).text)

        assert shown(stage="load") == ["run-b", "run-a"]
        assert shown(status="failed", since="2026-02-01", until="2026-02-28") == ["run-c", "run-b"]
        assert shown(since="2026-02-01", until="2026-02-02") == ["run-b", "run-a"]
        assert shown(stage="load", status="failed") == ["run-b"]


def test_the_row_browser_shows_the_rows_new_or_handled_for_one_consumer(ledger):
    with client(ledger) as c:
        done = c.get("/topics/rss.items", params={"consumer": "split_youtube", "status": "handled"}).text
        new = c.get("/topics/rss.items", params={"consumer": "split_youtube", "status": "new"}).text
        nobody = c.get("/topics/rss.items", params={"consumer": "nobody", "status": "new"})
        wrong = c.get("/topics/rss.items", params={"consumer": "split_youtube", "status": "maybe"})
    assert [int(i) for i in re.findall(r'<tr data-id="(\d+)"', done)] == list(range(1, 31))
    assert [int(i) for i in re.findall(r'<tr data-id="(\d+)"', new)][:3] == [31, 32, 33]
    assert 'href="/topics/rss.items?consumer=split_youtube&amp;status=new&amp;after=80"' in new
    assert nobody.status_code == 404 and "nobody" in nobody.text
    assert wrong.status_code == 400 and "maybe" in wrong.text


def test_an_action_on_a_ledger_damaged_since_the_page_was_shown_is_a_409_page(ledger):
    with client(ledger, allow_actions=True) as c:
        token = re.search(r'name="csrf" value="([^"]+)"', c.get("/actions/pause?schedule=hourly-digest").text).group(1)
        for suffix in ("-wal", "-shm"):
            ledger.with_name(ledger.name + suffix).unlink(missing_ok=True)
        ledger.write_bytes(b"not a ledger any more" * 300)
        response = c.post("/actions/pause", data={"schedule": "hourly-digest", "csrf": token})
    assert response.status_code == 409, response.text
    assert "nothing was changed" in response.text and "Traceback" not in response.text


def test_the_overview_shows_the_health_checks_worst_first(ledger):
    from minikafka.pipelines.health import health_checks

    with Source(ledger, read_only=True) as source:
        expected = {c.name: c.state for c in health_checks(source.ledger)}
    with client(ledger) as c:
        page = c.get("/").text
    shown = re.findall(r'<tr class="(ok|warn|fail)" data-check="([^"]+)">', page)
    assert {name: state for state, name in shown} == expected and expected
    order = ["fail", "warn", "ok"]
    assert [order.index(state) for state, _ in shown] == sorted(order.index(state) for state, _ in shown)


def test_twenty_quiet_nights_show_as_one_folded_row_on_the_runs_page(ledger):
    from minikafka.ledger.consuming import RunResult, write_run_in_current_transaction

    with Source(ledger) as source, source.ledger.atomic() as conn:  # a busy run: it read and wrote rows
        run = RunResult("load-busy", "stage", stage="load", rows_in=5, rows_out=5,
                        started_at="2026-03-01T02:00:00.000000Z")
        write_run_in_current_transaction(conn, run.finish("succeeded"))
    for day in range(2, 22):
        _log_run(ledger, f"load-{day:02d}", "load", "succeeded", f"2026-03-{day:02d}T02:00:00.000000Z")
    with client(ledger) as c:
        page = c.get("/runs", params={"stage": "load"}).text
        assert re.findall(r'<tr data-run="([^"]+)"', page) == ["load-21", "load-busy"]
        assert 'data-folded="20"' in page and "quiet ×20" in page and "2026-03-02T02:00:00.000000Z" in page
        every = c.get("/runs", params={"stage": "load", "all": "1"}).text
        assert len(re.findall(r'<tr data-run="([^"]+)"', every)) == 21 and "quiet ×" not in every
        assert "load-busy" in c.get("/runs").text  # the fold is one row of the unfiltered page too


def test_the_run_page_shows_counts_per_topic_and_an_old_run_without_them_still_shows(ledger):
    from minikafka.ledger.consuming import RunResult, write_run_in_current_transaction

    by_topic = {"inputs": {"rss.items": {"read": 5, "acked": 4, "failed": 1, "quarantined": 0}},
                "outputs": {"rss.youtube": {"written": 3, "duplicate": 1, "quarantined": 0},
                            "rss.articles": {"written": 1, "duplicate": 0, "quarantined": 2}}}
    with Source(ledger) as source, source.ledger.atomic() as conn:
        write_run_in_current_transaction(conn, RunResult(
            "split-new", "stage", stage="split", inputs=["rss.items"], outputs=["rss.youtube", "rss.articles"],
            rows_in=5, rows_out=4, rows_duplicate=1, rows_quarantined=2, rows_failed=1,
            details={"rows_by_topic": by_topic}).finish("partial"))
        write_run_in_current_transaction(conn, RunResult(
            "split-old", "stage", stage="split", inputs=["rss.items"], outputs=["rss.youtube", "rss.articles"],
            rows_in=2, rows_out=2).finish("succeeded"))
    with client(ledger) as c:
        page = c.get("/runs/split-new").text
        cells = re.findall(r'<tr data-topic="([^"]+)"><td>.*?</td>((?:<td class="num">\d+</td>)+)</tr>', page)
        shown = {topic: [int(n) for n in re.findall(r">(\d+)<", numbers)] for topic, numbers in cells}
        assert shown == {"rss.items": [5, 4, 1, 0], "rss.youtube": [3, 1, 0], "rss.articles": [1, 0, 2]}
        old = c.get("/runs/split-old")
        assert old.status_code == 200 and 'id="run-counts"' in old.text and "data-topic=" not in old.text

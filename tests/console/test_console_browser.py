"""The console in a real browser: Debian's headless Chromium, driven by Selenium, against a
``minikafka ui`` process the test starts on 127.0.0.1, over the example pipeline's ledger after
a real run. Each page is reached by clicking, and what it shows is checked against the ledger.

``MINIKAFKA_CONSOLE_SHOTS=DIR`` saves a screenshot of each page into DIR (the docs' figures:
``scripts/console_screenshots.sh``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import httpx
import pytest

from minikafka import Source
from minikafka.ledger.consuming import consumer_info, list_quarantined, read_models
from minikafka.ledger.consuming.quarantine import count_quarantined

pytestmark = pytest.mark.spark  # the example ledger comes from a real run of its pipeline

SHOTS = os.environ.get("MINIKAFKA_CONSOLE_SHOTS")


def by():
    from selenium.webdriver.common.by import By

    return By


def shot(browser, name: str) -> None:
    """Save the page as docs/how-to/img/console-NAME.png (with MINIKAFKA_CONSOLE_SHOTS): the docs show these."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(SHOTS) / f"console-{name}.png"))


def click(browser, text: str) -> None:
    """Follow the link whose visible text is ``text`` (the first one)."""
    browser.find_element(by().LINK_TEXT, text).click()


def settles(browser, probe, expected, timeout: float = 10):
    """Wait (WebDriverWait, no sleep) until ``probe(browser)`` equals ``expected`` after a navigation; return it."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    seen = []

    def ready(b):
        seen[:] = [probe(b)]
        return seen[0] == expected

    try:
        WebDriverWait(browser, timeout, ignored_exceptions=(StaleElementReferenceException,)).until(ready)
    except Exception:
        pass
    return seen[0] if seen else probe(browser)


def absent(browser, css: str) -> bool:
    """No element matches ``css`` on the page as it is (no implicit wait for one to appear)."""
    browser.implicitly_wait(0)
    try:
        return not browser.find_elements(by().CSS_SELECTOR, css)
    finally:
        browser.implicitly_wait(5)


def texts(browser, css: str) -> list[str]:
    return [e.text for e in browser.find_elements(by().CSS_SELECTOR, css)]


def attribute(browser, css: str, name: str) -> list[str]:
    return [e.get_attribute(name) for e in browser.find_elements(by().CSS_SELECTOR, css)]


def test_clicking_through_every_page_shows_what_the_ledger_holds(example_dir, start_console, browser):
    ledger = example_dir / "data" / "homelab.sqlite"
    console = start_console(ledger, "--pipeline", str(example_dir / "conf" / "homelab.toml"))
    with Source(ledger, read_only=True) as source:
        conn = source.ledger.conn
        runs = source.runs(limit=1000)
        last = {}
        for r in reversed(runs):
            last[r["stage"] or r["kind"]] = r
        topics = {t: read_models.topic_overview(conn, source.layout(t)) for t in source.topics()}
        scored_ids = [r["_id"] for r in read_models.row_page(conn, source.layout("rss.scored"), limit=100).rows]
        quarantined = list_quarantined(conn, None, limit=None)
        lags = {(i.topic, i.name): i.lag for i in consumer_info(conn)}

    browser.get(console.url + "/")
    shot(browser, "overview")
    # the DAG: every stage coloured by its last run, every topic with its lag
    for stage in ("split_youtube", "keep_articles", "transcribe", "llm_summary", "score"):
        node = browser.find_element(by().CSS_SELECTOR, f'a.node.stage[data-name="{stage}"]')
        assert f"{last[stage]['status']} · out {last[stage]['rows_out']}" in node.text
    for topic in topics:
        if topic.startswith("rss."):
            node = browser.find_element(by().CSS_SELECTOR, f'a.node.topic[data-name="{topic}"]')
            assert f"lag {max((v for (t, _), v in lags.items() if t == topic), default=0)}" in node.text
    with Source(ledger, read_only=True) as source:
        from minikafka.pipelines.definition import load_pipeline
        from minikafka.pipelines.health import health_checks

        checks = health_checks(source.ledger, load_pipeline(example_dir / "conf" / "homelab.toml", suites=False))
    shown = dict(zip(attribute(browser, "#health tr[data-check]", "data-check"),
                     attribute(browser, "#health tr[data-check]", "class")))
    assert shown == {c.name: c.state for c in checks}
    attention = browser.find_element(by().ID, "attention").text
    assert "notify" in attention and "1 dead job(s) in queue jobs.summarise" not in attention
    assert "2 dead job(s) in queue jobs.summarise" in attention
    assert absent(browser, "a.action, form[method=post]")

    click(browser, "Runs")
    assert len(browser.find_elements(by().CSS_SELECTOR, "tr[data-run]")) == len(runs)
    click(browser, last["split_youtube"]["run_id"])
    run = last["split_youtube"]
    counts = browser.find_element(by().ID, "run-counts").text.split()
    assert counts == [str(run[k]) for k in ("rows_in", "rows_out", "rows_duplicate", "rows_quarantined",
                                            "rows_failed")]
    # its counts per topic, as the commit recorded them, and adding up to the sums
    by_topic = run["details"]["rows_by_topic"]
    assert by_topic["inputs"]["rss.items"]["read"] == run["rows_in"]
    assert by_topic["outputs"]["rss.youtube"]["written"] == run["rows_out"]
    for table, keys in (("run-inputs", ("read", "acked", "failed", "quarantined")),
                        ("run-outputs", ("written", "duplicate", "quarantined"))):
        side = by_topic["inputs" if table == "run-inputs" else "outputs"]
        shown = {row.get_attribute("data-topic"): [int(td.text) for td in row.find_elements(by().CSS_SELECTOR, "td.num")]
                 for row in browser.find_elements(by().CSS_SELECTOR, f"#{table} tbody tr")}
        assert shown == {topic: [c[k] for k in keys] for topic, c in side.items()}
    results = [r for suite in run["quality"]["suites"] for r in suite["results"]]
    assert len(browser.find_elements(by().CSS_SELECTOR, "table.quality tbody tr")) == len(results)
    assert attribute(browser, "table.quality tbody tr", "data-expectation") == [r["expectation"] for r in results]
    written = browser.find_elements(by().CSS_SELECTOR, 'table.written[data-topic="rss.youtube"] tr[data-id]')
    assert len(written) == min(20, run["rows_out"])
    shot(browser, "run")
    if run["quality"].get("report"):
        click(browser, "the HTML report")
        assert "minikafka quality" in browser.title
        browser.back()

    click(browser, "Topics")
    for topic, c in topics.items():
        row = browser.find_element(by().CSS_SELECTOR, f'tr[data-topic="{topic}"]')
        assert row.find_element(by().CSS_SELECTOR, "td.total").text == str(c.total)
        assert row.find_element(by().CSS_SELECTOR, "td.new").text == str(c.new)
    click(browser, "rss.scored")
    assert [int(i) for i in attribute(browser, "#rows tr[data-id]", "data-id")] == scored_ids[:50]
    shot(browser, "topic")
    if len(scored_ids) > 50:
        browser.find_element(by().ID, "newer").click()
        assert [int(i) for i in attribute(browser, "#rows tr[data-id]", "data-id")] == scored_ids[50:100]
        assert "after=50" in browser.current_url and "offset" not in browser.current_url.lower()
    box = browser.find_element(by().NAME, "where")
    box.clear()
    box.send_keys(f"_id<={scored_ids[2]}")
    browser.find_element(by().CSS_SELECTOR, "form.filters button").click()
    ids = settles(browser, lambda b: [int(i) for i in attribute(b, "#rows tr[data-id]", "data-id")], scored_ids[:3])
    assert ids == scored_ids[:3]

    click(browser, "Quarantine")
    assert len(browser.find_elements(by().CSS_SELECTOR, "tr[data-qid]")) == len(quarantined)
    shot(browser, "quarantine")
    first = quarantined[-1]
    click(browser, str(first["id"]))
    assert browser.find_element(by().ID, "reason").text == first["reason"]
    assert json.loads(browser.find_element(by().ID, "payload").text) == json.loads(first["payload"])

    click(browser, "Queues")
    states = dict(zip(attribute(browser, "tr[data-job]", "data-job"), texts(browser, "tr[data-job] td.state")))
    assert states == {"1": "dead", "2": "dead", "3": "pending"}
    click(browser, "Schedules")
    assert texts(browser, 'tr[data-schedule="hourly-digest"] td.state') == ["active"]
    click(browser, "Groups")
    for (topic, name), lag in lags.items():
        assert texts(browser, f'tr[data-group="{topic}/{name}"] td.lag') == [str(lag)]
    assert absent(browser, "a.action, form[method=post]")

    # read-only: a forged POST is refused, and changes nothing
    forged = httpx.post(console.url + "/actions/pause", data={"schedule": "hourly-digest", "csrf": "x"})
    assert forged.status_code == 403
    with Source(ledger, read_only=True) as source:
        assert not source.scheduler().get("hourly-digest").paused
        assert count_quarantined(source.ledger.conn) == len(quarantined)


def confirm(browser, **fields) -> str:
    """On a confirmation page: fill ``fields``, press the button; return the result line."""
    for name, value in fields.items():
        box = browser.find_element(by().NAME, name)
        box.clear()
        box.send_keys(str(value))
    browser.find_element(by().ID, "confirm").click()
    return browser.find_element(by().ID, "result").text


def test_each_action_changes_the_ledger_as_the_cli_would_and_is_logged(ledger_copy, start_console, browser):
    console = start_console(ledger_copy, "--allow-actions")
    browser.get(console.url + "/queues")
    shot(browser, "queues-actions")

    # retry a dead job (Queue.requeue): pending again with fresh attempts
    browser.find_element(by().CSS_SELECTOR, 'tr[data-job="1"] a[data-action="retry"]').click()
    assert "1 dead job(s) of jobs.summarise pending again" in confirm(browser)
    browser.find_element(by().ID, "back").click()
    assert texts(browser, 'tr[data-job="1"] td.state') == ["pending"]
    # cancel a pending job (Queue.cancel)
    browser.find_element(by().CSS_SELECTOR, 'tr[data-job="3"] a[data-action="cancel"]').click()
    assert "cancelled job(s) [3]" in confirm(browser)
    browser.find_element(by().ID, "back").click()
    assert texts(browser, 'tr[data-finished="3"] td')[1] == "cancelled"

    # requeue the other dead job from the quarantine (api.core.requeue.requeue, as `quarantine requeue`)
    with Source(ledger_copy, read_only=True) as source:
        (dead,) = list_quarantined(source.ledger.conn, "jobs.summarise", limit=None)
    browser.get(console.url + "/quarantine?topic=jobs.summarise")
    browser.find_element(by().CSS_SELECTOR, f'tr[data-qid="{dead["id"]}"] input[name=ids]').click()
    browser.find_element(by().ID, "requeue-chosen").click()
    assert "requeued 1 row(s) of jobs.summarise" in confirm(browser)

    # pause, then resume, the schedule
    browser.get(console.url + "/schedules")
    browser.find_element(by().CSS_SELECTOR, 'a[data-action="pause"]').click()
    assert confirm(browser) == "schedule hourly-digest: paused"
    browser.find_element(by().ID, "back").click()
    assert texts(browser, 'tr[data-schedule="hourly-digest"] td.state') == ["paused"]
    browser.find_element(by().CSS_SELECTOR, 'a[data-action="resume"]').click()
    assert confirm(browser) == "schedule hourly-digest: resumed"

    # replay rows 1..10 of rss.items for split_youtube; seek the dashboard group to offset 20
    browser.get(console.url + "/groups")
    browser.find_element(by().CSS_SELECTOR, 'tr[data-group="rss.items/split_youtube"] a[data-action="replay"]').click()
    assert confirm(browser, from_id=1, to_id=10) == "10 row(s) of rss.items pending again for consumer split_youtube"
    browser.get(console.url + "/groups")
    browser.find_element(by().CSS_SELECTOR, 'tr[data-group="rss.items/dashboard"] a[data-action="seek"]').click()
    assert "now at offset 20" in confirm(browser, offset=20)
    browser.find_element(by().ID, "back").click()
    assert texts(browser, 'tr[data-group="rss.items/split_youtube"] td.lag') == ["10"]

    with Source(ledger_copy) as source:
        queue = source.queue("jobs.summarise", _summarise_model())
        assert [queue.get(i).state for i in (1, 2, 3)] == ["pending", "pending", "cancelled"]
        assert list_quarantined(source.ledger.conn, "jobs.summarise", limit=None) == []
        assert source.scheduler().get("hourly-digest").paused is False
        conn = source.ledger.conn
        lag = {(i.topic, i.name): i.lag for i in consumer_info(conn)}
        assert lag[("rss.items", "split_youtube")] == 10
        group = source.group("dashboard")
        assert group.committed("rss.items", 0) == 20
        logged = [r for r in source.runs(limit=100) if r["kind"] == "console"]
    assert [r["details"]["action"] for r in reversed(logged)] == [
        "retry", "cancel", "requeue", "pause", "resume", "replay", "seek"]
    assert {r["status"] for r in logged} == {"succeeded"}
    assert {r["details"]["host"] for r in logged} == {"127.0.0.1"}
    assert all("HeadlessChrome" in r["details"]["user_agent"] for r in logged)


def _summarise_model():
    from examples.myjobs import Summarise

    return Summarise


def test_a_page_updates_by_itself_when_the_ledger_commits(ledger_copy, start_console, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    console = start_console(ledger_copy)
    browser.get(console.url + "/topics")
    cell = 'tr[data-topic="rss.items"] td.total'
    before = int(texts(browser, cell)[0])
    with Source(ledger_copy) as source:
        items = source.topic("rss.items", source.model_of("rss.items"), dedup=("url",))
        items.append({"url": "https://example.com/live", "feed": "live", "title": "Live", "body": "b",
                      "published": "2026-01-01T00:00:00Z"})
    WebDriverWait(browser, 10).until(lambda b: texts(b, cell) == [str(before + 1)])
    assert re.match(r"\d+", browser.find_element(by().TAG_NAME, "body").get_attribute("data-updated") or "")

"""The alert rules and the Grafana dashboard the docs ship (docs/metrics/): they load in promtool, their
unit tests pass, and every query names only metrics (and labels) the exposition holds."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from minikafka.observe.prometheus import FAMILIES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics"
RULES = DOCS / "minikafka-alerts.yml"
RULE_TESTS = DOCS / "minikafka-alerts.test.yml"
DASHBOARD = DOCS / "minikafka-dashboard.json"
PROMTOOL = shutil.which("promtool")
KNOWN = {f.name: set(f.labels) for f in FAMILIES}
SELECTOR = re.compile(r"\b([a-z_:][a-z0-9_:]*)\s*(\{[^}]*\})?")
MATCHER = re.compile(r"([a-z_][a-z0-9_]*)\s*(=~|!~|!=|=)\s*\"")
FUNCTIONS = {"time", "sum", "max", "min", "avg", "delta", "absent", "by", "without", "rate", "increase", "count"}


def problems_of(expr: str, where: str) -> list[str]:
    """Metric names in ``expr`` that the exposition does not hold, and matchers on labels they lack."""
    out = []
    text = re.sub(r'"[^"]*"', '""', expr)  # label values and strings are not names
    named = 0
    for name, selector in SELECTOR.findall(text):
        if name in FUNCTIONS or re.fullmatch(r"[0-9e.]+", name) or not ("_" in name or selector):
            continue
        if name not in KNOWN:
            out.append(f"{where}: {name} is not a metric minikafka exports")
            continue
        named += 1
        for label, _ in MATCHER.findall(selector or ""):
            if label not in KNOWN[name]:
                out.append(f"{where}: {name} has no label {label}")
    if not named:
        out.append(f"{where}: names no minikafka metric: {expr}")
    return out


def test_every_alert_rule_names_only_metrics_and_labels_we_export():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) >= 6
    problems = [p for r in rules for p in problems_of(r["expr"], r["alert"])]
    assert not problems, "\n".join(problems)


def test_every_dashboard_query_names_only_metrics_and_labels_we_export():
    dashboard = json.loads(DASHBOARD.read_text())
    problems, queries = [], 0
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            queries += 1
            problems += problems_of(target["expr"], f"panel {panel['title']!r}")
            labels = set().union(*(KNOWN.get(n, set()) for n, _ in SELECTOR.findall(target["expr"])))
            for used in re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")):
                if used not in labels:
                    problems.append(f"panel {panel['title']!r}: legend names label {used} its query lacks")
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["definition"]).groups()
            if label not in KNOWN.get(metric, set()):
                problems.append(f"variable {variable['name']}: {metric} has no label {label}")
    assert queries >= 10
    assert not problems, "\n".join(problems)


def test_the_dashboard_is_importable_json_with_unique_panel_ids():
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert dashboard["uid"] == "minikafka" and dashboard["title"]
    assert all(p["datasource"]["uid"] == "${datasource}" for p in dashboard["panels"])


needs_promtool = pytest.mark.skipif(PROMTOOL is None,
                                    reason="promtool is not installed (scripts/setup.sh installs Debian's prometheus)")


@needs_promtool
def test_promtool_check_rules_accepts_the_alert_rules():
    done = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@needs_promtool
def test_the_alert_rules_fire_as_their_unit_tests_say():
    done = subprocess.run([PROMTOOL, "test", "rules", RULE_TESTS.name], cwd=DOCS, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_the_docs_page_shows_are_the_shipped_rule_file():
    from tests.docs.runner import blocks_of

    page = DOCS.parent / "how-to" / "metrics.md"
    saved = [b.text for b in blocks_of(page) if b.directives.get("save") == RULES.name]
    assert saved and saved[0].strip() == RULES.read_text().strip()


def test_counters_and_only_counters_are_named_total():
    kinds = {f.name: f.type for f in FAMILIES}
    assert {"counter", "gauge"} <= set(kinds.values())
    wrong = [name for name, kind in kinds.items() if name.endswith("_total") != (kind == "counter")]
    assert not wrong, wrong
    assert {"minikafka_stage_runs_total", "minikafka_topic_appended_rows_total",
            "minikafka_quarantined_rows_total"} <= {n for n, k in kinds.items() if k == "counter"}


def test_every_alert_rule_has_a_unit_test_that_fires_it_and_one_that_does_not():
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    cases = [c for t in yaml.safe_load(RULE_TESTS.read_text())["tests"] for c in t.get("alert_rule_test", [])]
    fires = {c["alertname"] for c in cases if c.get("exp_alerts")}
    quiet = {c["alertname"] for c in cases if not c.get("exp_alerts")}
    assert len(alerts) == 8
    assert not alerts - fires, f"never fired by a unit test: {sorted(alerts - fires)}"
    assert not alerts - quiet, f"never shown quiet by a unit test: {sorted(alerts - quiet)}"

"""Failing values of a column named like a secret (``api_key``), from a real Spark run: never in
the run log, the HTML report, the stage's error, or the console's Overview, run page and report."""

from __future__ import annotations

import json
import warnings

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.quality import load_suite
from minikafka.spark import Stage, StageFailed, run_stage

pytestmark = pytest.mark.spark

KEYS = ["sk-live-4f3e2d1c0b", "sk-live-9a8b7c6d5e"]


class Hook(BaseModel):
    url: str
    api_key: str


@pytest.fixture
def ledger(tmp_path):
    with Source(str(tmp_path / "ledger.sqlite")) as src:
        src.topic("hooks", Hook, dedup=("url",)).extend(
            [{"url": "https://ok/1", "api_key": "ak-good-1"}, {"url": "https://ok/2", "api_key": KEYS[0]},
             {"url": "https://ok/3", "api_key": KEYS[1]}, {"url": "http://bob:hunter2222@x/4", "api_key": "ak-2"}])
        src.topic("checked", Hook, dedup=("url",))
        yield src


def _stage(tmp_path, policy: str) -> Stage:
    path = tmp_path / f"{policy}.toml"
    path.write_text(f'policy = "{policy}"\n'
                    '[[expect]]\ntype = "expect_column_values_to_match_regex"\ncolumn = "api_key"\nregex = "^ak-"\n'
                    '[[expect]]\ntype = "expect_column_values_to_match_regex"\ncolumn = "url"\nregex = "^https://"\n')
    suite = load_suite(str(path), fields={"checked": ["url", "api_key"]}, topic="checked")
    return Stage("check_keys", ["hooks"], ["checked"], transform=lambda df: df.select("_id", "url", "api_key"),
                 suites=[suite])


def _leaks(text: str) -> list[str]:
    return [s for s in (*KEYS, "hunter2222") if s in text]


def test_failing_values_of_a_secret_named_column_are_masked_in_the_run_log_report_and_console(spark, ledger, tmp_path):
    result = run_stage(spark, ledger, _stage(tmp_path, "warn"))
    assert result.status == "succeeded"
    (run,) = [r for r in ledger.runs() if r["run_id"] == result.run_id]
    results = {r["column"]: r for r in run["quality"]["suites"][0]["results"]}
    assert results["api_key"]["unexpected_count"] == 2 and results["api_key"]["unexpected_sample"] == ["***", "***"]
    assert results["url"]["unexpected_sample"] == ["http://bob:***@x/4"]  # a secret inside a value, masked
    assert _leaks(json.dumps(run)) == []
    report = run["quality"]["report"]
    assert _leaks(open(report, encoding="utf-8").read()) == []

    pytest.importorskip("starlette")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from minikafka.console.app import create_app

    with TestClient(create_app(ledger.path), base_url="http://127.0.0.1") as c:
        pages = {p: c.get(p) for p in ("/", f"/runs/{result.run_id}", f"/runs/{result.run_id}/report")}
    for page, response in pages.items():
        assert response.status_code == 200, page
        assert _leaks(response.text) == [], page
    assert "expect_column_values_to_match_regex" in pages[f"/runs/{result.run_id}"].text


def test_a_failed_suite_on_a_secret_named_column_names_no_failing_value_in_its_error(spark, ledger, tmp_path):
    with pytest.raises(StageFailed) as failed:
        run_stage(spark, ledger, _stage(tmp_path, "fail"))
    assert "match_regex(api_key) unexpected=2" in str(failed.value)
    assert _leaks(str(failed.value)) == []
    assert _leaks(json.dumps(ledger.runs()[0])) == []

"""The HTML quality report shows what Data Docs show: arguments, observed values, unexpected
counts and percentages, sample failing values; and escapes what the data holds."""

from __future__ import annotations

from minikafka.quality.report import describe, write_report
from minikafka.quality.validate import SuiteOutcome, arguments, sample

ROWS = {"expectation": "expect_column_values_to_match_regex", "column": "url", "success": False, "row_level": True,
        "observed_value": None, "unexpected_count": 2, "unexpected_percent": 25.0, "element_count": 8,
        "missing_count": 1, "arguments": {"column": "url", "regex": "^https://"},
        "unexpected_sample": ["http://a", "<script>alert(1)</script>"]}
COUNT = {"expectation": "expect_table_row_count_to_be_between", "column": None, "success": True, "row_level": False,
         "observed_value": 8, "unexpected_count": None, "unexpected_percent": None,
         "arguments": {"min_value": 4, "max_value": 8}, "unexpected_sample": []}


def test_the_report_shows_arguments_observed_values_counts_percentages_and_samples(tmp_path):
    outcome = SuiteOutcome("links", "rss.items", "warn", False, [ROWS, COUNT])
    path = write_report(tmp_path / "reports" / "run-1.html", "run-1", "clean", [outcome], rows_in=8)
    html = path.read_text()
    for text in ("Quality report: stage clean", "run <code>run-1</code>", "Suite links", "policy <code>warn</code>",
                 "1 of 2 expectation(s) failed", "<code>regex</code> = ^https://", "<code>min_value</code> = 4",
                 "2 unexpected of 8 rows; 1 missing (null)", "25.00%", "<code>&#x27;http://a&#x27;</code>",
                 ">8<", "8 input row(s)"):
        assert text in html, text
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "observed None" not in html and ">None<" not in html


def test_a_result_reads_as_one_line():
    assert describe(ROWS) == "unexpected=2 of 8 (25.0%), e.g. 'http://a', '<script>alert(1)</script>'"
    assert describe(COUNT) == "observed=8"


def test_arguments_leave_out_great_expectations_bookkeeping_and_samples_are_bounded():
    assert arguments({"batch_id": "x", "column": "url", "regex": "^a", "result_format": "SUMMARY"}) == \
        {"column": "url", "regex": "^a"}
    values = sample(["x" * 500] + list(range(20)))
    assert len(values) == 10 and len(values[0]) == 201 and values[0].endswith("…")

"""An expectation that raised is reported as the error it is, never as bad data."""

from __future__ import annotations

import pytest

from minikafka.quality.validate import QualityCheckError, raised_exceptions

# the shape great-expectations 1.24 gives: one entry per metric id
PER_METRIC = {
    "('column_values.match_regex.unexpected_count', 'abc123', ())": {
        "exception_traceback": "Traceback ...", "exception_message": "Py4JJavaError: Connection refused",
        "raised_exception": True},
    "('table.row_count', (), ())": {"raised_exception": False, "exception_message": None},
}


def test_per_metric_exception_info_yields_each_raised_message():
    messages = raised_exceptions(PER_METRIC)
    assert len(messages) == 1 and "Connection refused" in messages[0] and "match_regex" in messages[0]


def test_flat_exception_info_is_read_too_and_a_clean_one_is_empty():
    assert raised_exceptions({"raised_exception": True, "exception_message": "boom"}) == ["boom"]
    assert raised_exceptions({"raised_exception": False, "exception_message": None}) == []
    assert raised_exceptions(None) == []


def test_the_error_names_stage_suite_and_expectation():
    with pytest.raises(QualityCheckError, match="stage 'score', suite 'scored': expectation "
                                               "expect_column_values_to_match_regex could not run: .*refused"):
        raise QualityCheckError("score", "scored", "expect_column_values_to_match_regex",
                                raised_exceptions(PER_METRIC))

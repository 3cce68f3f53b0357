"""One duration grammar (util/duration.py) for triggers, deliveries files, retention ages and max_age."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from minikafka.errors import InvalidDurationError
from minikafka.util.duration import parse_duration, parse_timedelta


@pytest.mark.parametrize("text, age", [("30d", timedelta(days=30)), ("12h", timedelta(hours=12)),
                                       ("2w", timedelta(weeks=2)), (" 90 m ", timedelta(minutes=90)),
                                       ("1.5d", timedelta(hours=36)), ("250ms", timedelta(milliseconds=250))])
def test_ages_read_a_number_and_a_unit(text, age):
    assert parse_timedelta(text) == age


@pytest.mark.parametrize("text", ["30", "d", "-1d", "1y", ""])
def test_bad_ages_are_refused(text):
    with pytest.raises(InvalidDurationError, match="30d"):
        parse_timedelta(text)


def test_durations_take_ms_s_m_h_d_and_w_text_and_numbers():
    assert [parse_duration(v) for v in ("500ms", "5s", "2m", "1h", "1d", "1w", 3, 0.5)] == \
        [0.5, 5.0, 120.0, 3600.0, 86400.0, 604800.0, 3.0, 0.5]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1, -0.5, "nan", "inf", "-5s", True, None, "5 hours"])
def test_nan_infinite_negative_and_unreadable_durations_are_a_clear_error_naming_the_key(value):
    with pytest.raises(InvalidDurationError, match=r"interval must be a positive duration.*got"):
        parse_duration(value, what="interval")


def test_zero_is_a_duration_only_where_allowed():
    assert parse_duration("0s", zero=True) == 0.0 and parse_duration(0, zero=True) == 0.0
    with pytest.raises(InvalidDurationError, match="timeout must be a positive duration"):
        parse_duration("0s", what="timeout")
    with pytest.raises(InvalidDurationError, match="finite duration >= 0"):
        parse_duration(math.nan, what="timeout", zero=True)


def test_duration_errors_are_value_errors_for_callers_that_catch_those():
    with pytest.raises(ValueError):
        parse_duration("soon")

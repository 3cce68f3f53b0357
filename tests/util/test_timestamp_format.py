"""``format_timestamp`` gives what converting to UTC with ``astimezone`` gives, for every kind of datetime."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel

from minikafka.util.clock import format_timestamp

ZONES = [timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8)),
         timezone(timedelta(hours=1, seconds=17, microseconds=5)), ZoneInfo("Europe/Berlin"),
         ZoneInfo("America/New_York"), None]


def by_astimezone(value: datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value.isoformat(timespec="microseconds") + "Z"


def test_random_datetimes_in_many_zones_format_as_their_utc_time():
    rng = random.Random(20261124)
    for _ in range(20_000):
        value = datetime(1, 1, 2) + timedelta(seconds=rng.randint(0, 315_000_000_000),
                                             microseconds=rng.randint(0, 999_999))
        value = value.replace(tzinfo=rng.choice(ZONES), fold=rng.randint(0, 1))
        try:
            expected = by_astimezone(value)
        except OverflowError:
            with pytest.raises(OverflowError):
                format_timestamp(value)
            continue
        assert format_timestamp(value) == expected, value


@pytest.mark.parametrize("text", ["2025-01-01T00:24:00+00:00", "2025-01-01T00:24:00Z", "2025-01-01T00:24:00.5-07:00",
                                  "0999-03-01T00:00:00+01:00", "2025-06-01T00:00:00"])
def test_timestamps_parsed_by_pydantic_format_as_their_utc_time(text):
    class Stamped(BaseModel):
        at: datetime

    value = Stamped.model_validate_json(f'{{"at": "{text}"}}').at
    assert format_timestamp(value) == by_astimezone(value)

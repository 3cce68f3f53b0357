"""Source(busy_timeout=...): a finite number of seconds >= 0, else InvalidSettingError naming the value."""

from __future__ import annotations

import pytest

from minikafka import Source
from minikafka.errors import InvalidSettingError, MinikafkaError
from minikafka.ledger.transactions.connection import MAX_BUSY_TIMEOUT_MS, busy_timeout_ms


@pytest.mark.parametrize("value", ["abc", "5", None, True, [1]])
def test_busy_timeout_that_is_not_a_number_is_refused_naming_it(value):
    with pytest.raises(InvalidSettingError, match="busy_timeout must be a number") as info:
        Source(":memory:", busy_timeout=value)
    assert repr(value) in str(info.value) and "abcabc" not in str(info.value)
    assert isinstance(info.value, (ValueError, MinikafkaError))


@pytest.mark.parametrize("value", [-1, -0.001, float("nan"), float("inf")])
def test_busy_timeout_negative_or_not_finite_is_refused(value):
    with pytest.raises(InvalidSettingError, match=">= 0"):
        Source(":memory:", busy_timeout=value)


def test_bad_busy_timeout_creates_no_file(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with pytest.raises(InvalidSettingError):
        Source(path, busy_timeout=-1)
    assert not path.exists()


@pytest.mark.parametrize("value, ms", [(0, 0), (2.5, 2500), (30, 30000), (10**12, MAX_BUSY_TIMEOUT_MS)])
def test_busy_timeout_in_seconds_becomes_the_connections_milliseconds(value, ms):
    assert busy_timeout_ms(value) == ms
    with Source(":memory:", busy_timeout=value) as src:
        assert src._ledger.conn.execute("PRAGMA busy_timeout").fetchone()[0] == ms


def test_read_only_open_applies_busy_timeout(tmp_path):
    path = tmp_path / "ledger.sqlite"
    Source(path).close()
    with Source(path, read_only=True, busy_timeout=1.5) as src:
        assert src._ledger.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1500

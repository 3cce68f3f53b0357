"""HttpPoster against a real server on 127.0.0.1: outcomes, headers, timeouts, backoff."""

from __future__ import annotations

import random
import socket
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from minikafka.connectors.http import Backoff, HttpPoster, idempotency_key, redact_url, to_json_bytes

from .scripted_server import ScriptedServer


def test_a_2xx_answer_is_ok_and_sends_json_with_the_idempotency_key():
    with ScriptedServer([201]) as server, HttpPoster(server.url, headers={"X-Token": "s3cret"}, timeout=2) as http:
        outcome = http.post_json({"n": 1}, idempotency_key="g/t/0/1-2")
    assert outcome.ok and outcome.status == 201 and outcome.error is None
    got = server.requests[0]
    assert got.body == {"n": 1} and got.headers["Idempotency-Key"] == "g/t/0/1-2"
    assert got.headers["X-Token"] == "s3cret" and got.headers["Content-Type"] == "application/json"


def test_a_500_answer_is_not_ok_and_keeps_a_body_excerpt():
    with ScriptedServer([500]) as server, HttpPoster(server.url, timeout=2) as http:
        outcome = http.post_json({})
    assert not outcome.ok and outcome.status == 500
    assert outcome.describe() == "HTTP 500: server error 500: try later"


def test_a_hanging_endpoint_times_out_without_raising():
    with ScriptedServer(["hang"], hang_seconds=2) as server, HttpPoster(server.url, timeout=0.2) as http:
        outcome = http.post_json({})
    assert not outcome.ok and outcome.status is None and "timeout after 0.2s" in outcome.describe()
    assert outcome.elapsed < 1.5


def test_a_refused_connection_is_an_outcome_not_an_exception():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with HttpPoster(f"http://127.0.0.1:{port}/x", timeout=1) as http:
        outcome = http.post_json({})
    assert not outcome.ok and outcome.status is None and "ConnectError" in outcome.describe()


def test_secrets_stay_out_of_repr_and_urls_are_redacted():
    http = HttpPoster("https://user:pw@example.com/hook?token=abc", headers={"X-Api-Key": "Bearer zzz"})
    assert "zzz" not in repr(http) and "pw" not in repr(http) and "abc" not in repr(http)
    assert redact_url("https://user:pw@example.com:8443/hook?token=abc#x") == "https://example.com:8443/hook"
    http.close()


def test_bad_endpoints_and_timeouts_are_refused():
    with pytest.raises(ValueError, match="http:// or https://"):
        HttpPoster("ftp://example.com/x")
    with pytest.raises(ValueError, match="timeout"):
        HttpPoster("http://example.com/x", timeout=0)


def test_backoff_doubles_from_the_base_with_jitter_and_is_capped():
    rng = random.Random(7)
    policy = Backoff(base=1.0, cap=10.0, jitter=0.2)
    delays = [policy.delay(n, rng) for n in range(1, 8)]
    assert 0.8 <= delays[0] <= 1.2 and 1.6 <= delays[1] <= 2.4 and 3.2 <= delays[2] <= 4.8
    assert all(d <= 10.0 for d in delays) and delays[-1] >= 8.0
    assert Backoff(1.0, 10.0, jitter=0.0).delay(100) == 10.0


def test_idempotency_key_is_the_same_for_the_same_batch():
    assert idempotency_key("g", "orders", 1, 10, 20) == idempotency_key("g", "orders", 1, 10, 20) == "g/orders/1/10-20"
    assert idempotency_key("g", "orders", 1, 10, 21) != idempotency_key("g", "orders", 1, 10, 20)


def test_ledger_values_encode_to_json():
    when = datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc)
    assert to_json_bytes({"t": when, "d": Decimal("1.10"), "b": b"\x00"}) == (
        b'{"t":"2024-01-02T03:04:05.000006Z","d":"1.10","b":"AA=="}')


def test_outcomes_mask_header_values_and_url_secrets_quoted_by_errors_or_answers():
    from minikafka.util.redact import redact_text, redact_url

    assert redact_url("http://u:pw@127.0.0.1:99999/x?t=1") == "http://127.0.0.1:99999/x"  # never raises
    assert redact_text("b'Bearer tok-123456\\r' and tok-123456", ["Bearer tok-123456\r"]) == "b'***' and ***"
    with pytest.raises(ValueError, match="header 'X-Key'") as err:
        HttpPoster("http://127.0.0.1:9/x", headers={"X-Key": "tok-123456\n"})
    assert "tok-123456" not in str(err.value)
    with pytest.raises(ValueError, match=r"invalid port") as err:
        HttpPoster("http://u:tok-123456@127.0.0.1:99999/x")
    assert "tok-123456" not in str(err.value)
    with pytest.raises(ValueError, match="timeout"):
        HttpPoster("http://127.0.0.1:9/x", timeout=float("nan"))

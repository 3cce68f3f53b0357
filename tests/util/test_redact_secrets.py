"""redact_secrets: free text on a web page keeps its meaning and loses every secret in it."""

from __future__ import annotations

import pytest

from minikafka.util.redact import redact_secrets


@pytest.mark.parametrize("text, secret", [
    ("POST https://bot:hunter22@llm.example/v1 failed", "hunter22"),
    ("mqtt://user:p4ss@broker:1883/topic", "p4ss"),
    ("GET https://api.example/x?token=abcdef123&page=2", "abcdef123"),
    ("Authorization: Bearer sk-live-0123456789", "sk-live-0123456789"),
    ("authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ('{"api_key": "zzz-999-yyy", "url": "https://e.x"}', "zzz-999-yyy"),
    ("X-Auth-Token: t0k3n-value", "t0k3n-value"),
    ("password=correct-horse", "correct-horse"),
])
def test_a_secret_in_free_text_is_masked(text, secret):
    shown = redact_secrets(text)
    assert secret not in shown and "***" in shown


def test_the_rest_of_the_text_stays_readable():
    text = "fetch https://www.youtube.com/watch?v=abc123 from feed lwn.net failed: 404"
    assert redact_secrets(text) == text
    assert redact_secrets("POST https://bot:pw1234@h.example/v1") == "POST https://bot:***@h.example/v1"


def test_listed_secrets_are_masked_wherever_they_appear():
    assert redact_secrets("the token is plain-secret-value here", ["plain-secret-value"]) == "the token is *** here"
    assert redact_secrets(None) == "" and redact_secrets("") == ""


@pytest.mark.parametrize("name, secret", [
    ("api_key", True), ("password", True), ("X-Auth-Token", True), ("access_token", True), ("Authorization", True),
    ("title", False), ("keyboard", False), ("monkey", False), ("url", False), ("design", False),
])
def test_a_field_named_like_a_secret_is_told_apart(name, secret):
    from minikafka.util.redact import is_secret_name

    assert is_secret_name(name) is secret


@pytest.mark.parametrize("url, shown", [
    ("sc://spark.lan:15002/;token=s3cr3t-Tok;user_id=bob", "sc://spark.lan:15002/;token=***;user_id=bob"),
    ("sc://spark.lan:15002/;user_id=bob;use_ssl=true;token=s3cr3t-Tok", "sc://spark.lan:15002/;user_id=bob;use_ssl=true;token=***"),
    ("sc://spark.lan:15002;token=s3cr3t-Tok", "sc://spark.lan:15002;token=***"),
])
def test_a_spark_connect_url_shows_its_user_id_but_never_its_token(url, shown):
    from minikafka.util.redact import redact_text, redact_url, url_secrets

    assert redact_url(url) == shown
    assert url_secrets(url) == ["s3cr3t-Tok"]
    assert redact_text(f"no engine answers at {url}", url_secrets(url)) == f"no engine answers at {shown}"
    assert "s3cr3t-Tok" not in redact_secrets(f"connecting to {url}")


def test_a_percent_encoded_spark_connect_token_is_a_secret_as_written_and_decoded():
    from minikafka.util.redact import redact_url, url_secrets

    url = "sc://h:15002/;token=a%3Bb%2Fc-secret"
    assert redact_url(url) == "sc://h:15002/;token=***"
    assert set(url_secrets(url)) == {"a%3Bb%2Fc-secret", "a;b/c-secret"}

"""Telling a person that something changed: POST a message to a webhook, retried with backoff.

``notify(url, document, text, fmt="json")`` sends one message to one receiver:

- ``json``: the document as JSON (``Content-Type: application/json``), for webhooks and
  monitoring tools;
- ``text``: the one-line text as the body (``Content-Type: text/plain``), for ntfy-style
  receivers that show the body as the message.

A 2xx answer is delivered; a timeout, a refused connection, a 5xx or a 429 is retried
with exponential backoff (``connectors.http.Backoff``) up to ``attempts`` times; any other
answer (a 4xx: a wrong URL or token) is not retried. The URL's secrets (password, query
tokens) never reach the outcome, its errors or its description: it names the URL redacted.
The message itself is masked before it is sent (``util.redact``): a document or a line
quoting an error never carries a URL password or a token to the receiver.

``headers`` (e.g. ``{"Authorization": "Bearer ..."}``) go with every request; their values
are secrets: they never reach the outcome, its error, a log record of the HTTP libraries
(``HttpPoster`` guards them) or a message about a bad header (which names the header only).
``parse_notify_headers`` builds them from ``Name: value`` texts and ``Name=ENVVAR`` pairs
(the value read from the environment, so that it is not on a command line either).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidSettingError
from ..util.redact import redact_secrets, redact_url, redact_value, url_secrets
from .http import Backoff, HttpPoster, check_endpoint, check_header, is_header_name, to_json_bytes

__all__ = ["FORMATS", "NotifyOutcome", "check_header", "check_notify_url", "notify", "parse_notify_headers"]

FORMATS = ("json", "text")
RETRYABLE = {408, 425, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class NotifyOutcome:
    """What sending one message did.

    Attributes:
        url: the receiver, redacted (no password, query or fragment).
        delivered: a 2xx answer came.
        attempts: requests made.
        error: the last problem (redacted), None when delivered.
    """

    url: str
    delivered: bool
    attempts: int
    error: str | None = None

    def describe(self) -> str:
        if self.delivered:
            return f"notified {self.url} ({self.attempts} attempt(s))"
        return f"could not notify {self.url} after {self.attempts} attempt(s): {self.error}"


def check_notify_url(url: str) -> str:
    """``url`` if it is an http(s) URL (the error shows it redacted).

    Raises:
        ValueError: anything else.
    """
    return check_endpoint(url)


def parse_notify_headers(given: Iterable[str] = (), from_env: Iterable[str] = (), *,
                         environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers of ``Name: value`` texts and ``Name=ENVVAR`` pairs (the value is the
    environment variable's), each checked as ``check_header`` does.

    Raises:
        InvalidSettingError: (a ValueError) a text without ``:``, a pair without ``=``, an
            unset environment variable, a header given twice, a name HTTP cannot carry or a
            value with a line break; the message names the header or the variable, never a value.
    """
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}

    def add(name: str, value: str) -> None:
        if any(name.lower() == known.lower() for known in out):
            raise InvalidSettingError(f"header {name!r} is given twice; give each header once (values not shown)")
        check_header(name, value)
        out[name] = value

    for number, text in enumerate(given, 1):
        name, sep, value = str(text).partition(":")
        # a text that is not 'Name: value' may be a bare secret ('Bearer abc:def'): none of it is quoted
        if not sep or not is_header_name(name.strip()):
            raise InvalidSettingError(f"notify header #{number} must look like 'Name: value' (no valid "
                                      "header name before a ':'; the text is not shown)")
        add(name.strip(), value.strip(" \t"))
    for number, text in enumerate(from_env, 1):
        name, sep, var = str(text).partition("=")
        if not sep or not is_header_name(name.strip()) or not var.strip():
            raise InvalidSettingError(f"notify header from the environment #{number} must look like "
                                      "'Name=ENVVAR' (the text is not shown)")
        name, var = name.strip(), var.strip()
        if var not in env:
            raise InvalidSettingError(f"header {name!r}: the environment variable {var} is not set")
        add(name, env[var].strip(" \t"))
    return out


def notify(url: str, document: Any, text: str, *, fmt: str = "json", attempts: int = 4,
           headers: Mapping[str, str] | None = None,
           backoff: Backoff = Backoff(base=1.0, cap=30.0), timeout: float = 10.0,
           sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> NotifyOutcome:
    """POST one message to ``url``; retried on transient trouble.

    Args:
        document: the JSON document (``fmt="json"``).
        text: the one-line message (``fmt="text"``).
        attempts: requests at most (>= 1).
        headers: sent with every request (an auth token for the receiver); their values are
            secrets, masked in everything the outcome says.
        sleep: waits between attempts (tests pass a recorder instead of sleeping).

    Raises:
        InvalidSettingError: (a ValueError) not an http(s) URL, an unknown ``fmt``, ``attempts`` < 1
            or a header HTTP cannot carry (named, its value not shown); nothing sent.
    """
    check_notify_url(url)
    for name, value in (headers or {}).items():
        check_header(name, value)
    if fmt not in FORMATS:
        raise InvalidSettingError(f"notify format must be one of {FORMATS}, got {fmt!r}")
    if attempts < 1:
        raise InvalidSettingError(f"attempts must be at least 1, got {attempts}")
    shown = redact_url(url)
    secrets = url_secrets(url) + list((headers or {}).values())
    # what is sent is masked too: a message quoting an error must not carry its secrets to the receiver
    body = to_json_bytes(redact_value(document)) if fmt == "json" else redact_secrets(text).encode("utf-8")
    sent = {} if fmt == "json" else {"Content-Type": "text/plain; charset=utf-8"}
    sent.update(headers or {})
    error = None
    with HttpPoster(url, headers=sent, timeout=timeout) as poster:
        for attempt in range(1, attempts + 1):
            outcome = poster.post_json(body=body)  # never raises for network trouble
            if outcome.ok:
                return NotifyOutcome(shown, True, attempt)
            error = redact_secrets(outcome.describe(), secrets)
            if outcome.status is not None and outcome.status not in RETRYABLE:
                return NotifyOutcome(shown, False, attempt, error)
            if attempt < attempts:
                sleep(backoff.delay(attempt, rng))
    return NotifyOutcome(shown, False, attempts, error)

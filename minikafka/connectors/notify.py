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
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidSettingError
from ..util.redact import redact_text, redact_url, url_secrets
from .http import Backoff, HttpPoster, check_endpoint, to_json_bytes

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


def notify(url: str, document: Any, text: str, *, fmt: str = "json", attempts: int = 4,
           backoff: Backoff = Backoff(base=1.0, cap=30.0), timeout: float = 10.0,
           sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> NotifyOutcome:
    """POST one message to ``url``; retried on transient trouble.

    Args:
        document: the JSON document (``fmt="json"``).
        text: the one-line message (``fmt="text"``).
        attempts: requests at most (>= 1).
        sleep: waits between attempts (tests pass a recorder instead of sleeping).

    Raises:
        InvalidSettingError: (a ValueError) not an http(s) URL, an unknown ``fmt`` or ``attempts`` < 1
            (nothing sent).
    """
    check_notify_url(url)
    if fmt not in FORMATS:
        raise InvalidSettingError(f"notify format must be one of {FORMATS}, got {fmt!r}")
    if attempts < 1:
        raise InvalidSettingError(f"attempts must be at least 1, got {attempts}")
    shown = redact_url(url)
    secrets = url_secrets(url)
    body = to_json_bytes(document) if fmt == "json" else text.encode("utf-8")
    headers = {} if fmt == "json" else {"Content-Type": "text/plain; charset=utf-8"}
    error = None
    with HttpPoster(url, headers=headers, timeout=timeout) as poster:
        for attempt in range(1, attempts + 1):
            outcome = poster.post_json(body=body)  # never raises for network trouble
            if outcome.ok:
                return NotifyOutcome(shown, True, attempt)
            error = redact_text(outcome.describe(), secrets)
            if outcome.status is not None and outcome.status not in RETRYABLE:
                return NotifyOutcome(shown, False, attempt, error)
            if attempt < attempts:
                sleep(backoff.delay(attempt, rng))
    return NotifyOutcome(shown, False, attempts, error)

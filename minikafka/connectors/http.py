"""POSTing JSON to an HTTP endpoint: the one implementation every HTTP connector reuses.

The delivery worker (``connectors/delivery.py``) and any sink that sends rows to an
endpoint build on three pieces from here instead of re-implementing them:

- ``HttpPoster``: one pooled ``httpx.Client`` for one endpoint, fixed headers (secrets
  allowed: they are never part of ``repr`` or of an outcome), a timeout covering
  connect, write, read and pool wait. ``post_json(payload, idempotency_key=...)``
  never raises for transport trouble: it returns a ``PostOutcome``.
- ``PostOutcome``: what happened (``ok`` for any 2xx, ``status``, a short excerpt of
  the answer body, ``error`` for timeouts and refused connections, ``elapsed``), with
  ``describe()`` for logs and the quarantine reason.
- ``Backoff``: exponential backoff with jitter, capped (``delay(attempt)``), and
  ``idempotency_key(...)``: the ``Idempotency-Key`` header value of a batch, the same
  every time the same batch is sent, so a receiver can drop a re-sent batch.

``to_json_bytes`` encodes ledger values (datetimes, dates, Decimals, enums, bytes,
UUIDs, pydantic models) the same way for every connector.

Example::

    with HttpPoster("https://example.com/ingest", headers={"Authorization": token}, timeout=5) as http:
        outcome = http.post_json({"messages": [...]}, idempotency_key=idempotency_key("g", "orders", 0, 1, 500))
        if not outcome.ok:
            print(outcome.describe())
"""

from __future__ import annotations

import base64
import enum
import json
import math
import random
import re
import time
import uuid
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from ..errors import InvalidSettingError
from ..util.redact import guard_library_logs, redact_and_cut, redact_url, url_secrets

__all__ = ["Backoff", "HttpPoster", "PostOutcome", "check_endpoint", "check_header", "idempotency_key",
           "json_default", "redact_url", "to_json_bytes"]

EXCERPT_CHARS = 500
ERROR_CHARS = 240  # of a network error's first line
IDEMPOTENCY_HEADER = "Idempotency-Key"


@dataclass(frozen=True)
class PostOutcome:
    """The result of one POST.

    Attributes:
        ok: the endpoint answered 2xx.
        status: the HTTP status code, or None when no answer came (timeout, refused, DNS).
        body_excerpt: the first characters of the answer body ('' without an answer).
        error: what went wrong on the way (None when an answer came, even a non-2xx one).
        elapsed: seconds the request took.
    """

    ok: bool
    status: int | None
    body_excerpt: str
    error: str | None
    elapsed: float

    def describe(self) -> str:
        """One line for logs and quarantine reasons: ``HTTP 500: <excerpt>`` or the error."""
        if self.status is None:
            return self.error or "no answer"
        text = " ".join(self.body_excerpt.split())
        return f"HTTP {self.status}" + (f": {text}" if text else "")


_TCHAR = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def is_header_name(name: object) -> bool:
    """``name`` is an HTTP token, as a header's name must be."""
    return isinstance(name, str) and _TCHAR.match(name) is not None


def check_header(name: object, value: object) -> None:
    """Refuse a header HTTP cannot carry, naming the header and never its value.

    A value with a line break (``"Bearer x\\r"`` read from a file with CRLF endings),
    another control character, or leading/trailing whitespace would make the HTTP
    library raise an error quoting the value: the secret would reach logs and the ledger.

    Raises:
        ValueError: a name that is not an HTTP token, or such a value.
    """
    if not isinstance(name, str) or not _TCHAR.match(name):
        raise InvalidSettingError(f"header name {name!r} is not a valid HTTP header name")
    if not isinstance(value, str):
        raise InvalidSettingError(f"header {name!r}: the value must be text, got {type(value).__name__} (value not shown)")
    if _BAD_VALUE.search(value):
        raise InvalidSettingError(f"header {name!r}: the value holds a line break (CR/LF) or another control character; "
                         "fix the value (not shown here)")
    if value != value.strip(" \t"):
        raise InvalidSettingError(f"header {name!r}: the value starts or ends with whitespace; fix the value (not shown here)")


def check_endpoint(endpoint: object) -> str:
    """``endpoint`` if it is an http(s) URL with a host and a valid port.

    Raises:
        ValueError: anything else (the message shows the URL redacted).
    """
    if not isinstance(endpoint, str):
        raise InvalidSettingError(f"endpoint must be an http:// or https:// URL, got {type(endpoint).__name__}")
    try:
        parts = urlsplit(endpoint)
    except ValueError:
        raise InvalidSettingError(f"endpoint {redact_url(endpoint)!r} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidSettingError(f"endpoint must be an http:// or https:// URL with a host, got {redact_url(endpoint)!r}")
    try:
        parts.port  # noqa: B018 (urllib checks the range only when asked)
    except ValueError:
        raise InvalidSettingError(f"endpoint {redact_url(endpoint)!r} has an invalid port "
                         f"(a number from 1 to 65535)") from None
    if parts.port == 0:
        raise InvalidSettingError(f"endpoint {redact_url(endpoint)!r} has an invalid port (a number from 1 to 65535)")
    return endpoint


class HttpPoster:
    """POST JSON bodies to one endpoint over one pooled connection.

    Args:
        endpoint: an http(s) URL.
        headers: extra headers sent with every request (values may be secrets: they
            never appear in ``repr``, logs or outcomes; an error text or answer body
            quoting one has it masked).
        timeout: seconds allowed for each of connecting, sending, reading the answer
            and waiting for a pooled connection.
        client: an ``httpx.Client`` to use instead of a new one (not closed by ``close()``).

    Raises:
        ValueError: the endpoint is not an http(s) URL with a host and a valid port, the
            timeout is not a positive finite number, a header cannot be sent (the
            message names the header, never its value), or the credentials come both as
            the URL's user info and as an ``Authorization`` header (refused rather than
            one silently replacing the other).
    """

    def __init__(self, endpoint: str, *, headers: dict[str, str] | None = None, timeout: float = 10.0,
                 client: httpx.Client | None = None):
        check_endpoint(endpoint)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
                or timeout <= 0:
            raise InvalidSettingError(f"timeout must be a positive, finite number of seconds, got {timeout!r}")
        for name, value in (headers or {}).items():
            check_header(name, value)
        parts = urlsplit(endpoint)
        userinfo, _, host = parts.netloc.rpartition("@")
        if userinfo and any(name.lower() == "authorization" for name in headers or {}):
            raise InvalidSettingError(f"endpoint {redact_url(endpoint)!r} has both user info (user:password@) and an "
                             "Authorization header: give the credentials one way only (values not shown)")
        self.endpoint = endpoint
        self.timeout = float(timeout)
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        # the URL httpx sees (and logs) carries no user info: the credentials go as Basic auth
        self._url = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
        user, _, password = userinfo.partition(":")
        self._auth = httpx.BasicAuth(unquote(user), unquote(password)) if userinfo else None
        # what an error text, an answer body or a library's log record must never show: header
        # values, the URL's password and query (every encoding: see util.redact.secret_forms)
        self._secrets = [v for k, v in (headers or {}).items() if k.lower() != "content-type"] + url_secrets(endpoint)
        self._unguard = guard_library_logs(self._secrets)
        self._own_client = client is None
        self._client = client or httpx.Client(timeout=httpx.Timeout(self.timeout), follow_redirects=False)

    def __repr__(self) -> str:
        names = sorted(k for k in self._headers if k.lower() != "content-type")
        return f"HttpPoster({redact_url(self.endpoint)!r}, headers={names!r}, timeout={self.timeout})"

    def __enter__(self) -> HttpPoster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._own_client:
            self._client.close()
        self._unguard()

    def post_json(self, payload: Any = None, *, body: bytes | None = None,
                  idempotency_key: str | None = None) -> PostOutcome:
        """POST ``payload`` encoded as JSON (or ``body``, already encoded).

        Never raises for network trouble or error answers: a timeout, a refused
        connection or a non-2xx status come back as an outcome with ``ok=False``.
        """
        data = body if body is not None else to_json_bytes(payload)
        headers = self._headers
        if idempotency_key is not None:
            headers = {**headers, IDEMPOTENCY_HEADER: idempotency_key}
        t0 = time.perf_counter()
        try:
            response = self._client.post(self._url, content=data, headers=headers,
                                         auth=self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT)
        except httpx.TimeoutException as exc:
            return PostOutcome(False, None, "", f"timeout after {self.timeout:g}s ({type(exc).__name__})",
                               time.perf_counter() - t0)
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            error = redact_and_cut(f"{type(exc).__name__}: {str(exc) or type(exc).__name__}", ERROR_CHARS,
                                   self._secrets, first_line=True)
            return PostOutcome(False, None, "", error, time.perf_counter() - t0)
        elapsed = time.perf_counter() - t0
        # an answer may echo the request's headers back: never keep a secret from it
        # (masked, then cut: a secret the cut went through would show its head; a prefix of the body
        # is masked, far longer than the excerpt, so that a huge answer costs no more)
        excerpt = "" if 200 <= response.status_code < 300 else redact_and_cut(
            response.text[:EXCERPT_CHARS * 8], EXCERPT_CHARS, self._secrets)
        return PostOutcome(200 <= response.status_code < 300, response.status_code, excerpt, None, elapsed)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter, capped.

    Attempt ``n`` (1 = the first retry) waits ``min(cap, base * 2**(n-1))`` seconds,
    spread by +/- ``jitter`` (a fraction) so many workers do not retry in step, and
    never more than ``cap``.
    """

    base: float
    cap: float
    jitter: float = 0.2

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        exp = min(max(attempt, 1) - 1, 62)
        raw = min(self.cap, self.base * (2 ** exp))
        spread = 1.0 + self.jitter * (2.0 * (rng or random).random() - 1.0)
        return max(0.0, min(self.cap, raw * spread))


def idempotency_key(group: str, topic: str, partition: int, first_offset: int, last_offset: int) -> str:
    """The ``Idempotency-Key`` of a batch: ``group/topic/partition/first-last``.

    Offsets are never reused, so the key names one batch of one group for good; '/'
    appears in neither group nor topic names, so the key is unambiguous.
    """
    return f"{group}/{topic}/{int(partition)}/{int(first_offset)}-{int(last_offset)}"


def json_default(value: Any) -> Any:
    """JSON form of values ``json`` cannot encode by itself (ledger field types)."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
            return value.isoformat(timespec="microseconds") + "Z"
        return value.isoformat(timespec="microseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, uuid.UUID):
        return str(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


def to_json_bytes(payload: Any) -> bytes:
    """``payload`` as compact UTF-8 JSON (see ``json_default`` for non-JSON values)."""
    return json.dumps(payload, default=json_default, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

"""Keeping secrets out of output: the one place URLs and texts are redacted before printing.

Secrets are URL passwords (``mqtt://user:pw@host``), tokens in a URL's query, and HTTP
header values (``Authorization: Bearer ...``). Nothing that prints, logs, raises or
stores a URL or an error text that may quote one shows them:

- ``redact_url(url)``: the URL without user info, query or fragment. Never raises, even
  for a URL Python cannot parse (a port out of range), so it is safe in error messages.
- ``redact_text(text, secrets)``: ``text`` with every occurrence of each secret (and of
  its words, and of its escaped form as ``repr`` shows it) replaced by ``***``. Used on
  texts that come from elsewhere (an HTTP library's exception, an answer body that
  echoes a request header) before they reach a log, an error or a ledger row.
- ``is_secret_name(name)``: a field or header named like a secret (``api_key``, ``password``,
  ``X-Auth-Token``): a table shows ``***`` for its value.
- ``redact_secrets(text, secrets)``: for free text whose secrets nobody listed (a run's error,
  a quarantined payload shown on a web page): ``redact_text`` with ``secrets``, then every
  URL's password, every value of a query parameter or field named like a secret (token, key,
  password, secret, signature, auth) and every ``Authorization``/``Bearer`` value masked.

Header values are never echoed at all: messages about a header name the header only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
MIN_WORD = 6  # shorter words of a secret are too common to mask (a 6+ character token word is masked)


def redact_url(url: object) -> str:
    """``url`` as ``scheme://host[:port]/path``: no user info, query or fragment."""
    text = str(url)
    try:
        parts = urlsplit(text)
    except ValueError:  # e.g. an unbalanced '[' in the host: show nothing after the scheme
        scheme = text.split("://", 1)[0] if "://" in text else ""
        return f"{scheme}://{MASK}" if scheme else MASK
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def url_secrets(url: object) -> list[str]:
    """The parts of ``url`` that may be secret: its password and its query."""
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return [str(url)]
    userinfo = parts.netloc.rpartition("@")[0]
    out = [userinfo.partition(":")[2], parts.query, parts.fragment]
    return [s for s in out if s]


def redact_text(text: str | None, secrets: Iterable[str | None]) -> str:
    """``text`` with each secret, its escaped form and its longer words replaced by ``***``."""
    if not text:
        return text or ""
    needles: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        needles.add(secret)
        needles.add(secret.strip())
        needles.add(repr(secret)[1:-1])  # 'Bearer x\r' as an exception quotes it: Bearer x\\r
        needles.update(word for word in secret.split() if len(word) >= MIN_WORD)
    for needle in sorted((n for n in needles if n), key=len, reverse=True):
        text = text.replace(needle, MASK)
    return text


_SECRET_NAME = r"(?:[A-Za-z0-9_.-]*[_.-])?(?:apikey|token|key|passw(?:or)?d|pwd|secret|signature|sig|auth|authorization|credentials?)"
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@'\"]*:)(?P<secret>[^\s@/'\"]+)(?=@)")
# name=value in a query or a form, and "name": "value" / name: value in JSON, headers and logs
_NAMED = re.compile(r"(?P<head>(?<![A-Za-z0-9])" + _SECRET_NAME + r"(?P<sep>=|\"?\s*:\s*\"?))(?P<secret>[^\s&\"',;}]+)",
                    re.IGNORECASE)
_WHOLE_SECRET_NAME = re.compile(_SECRET_NAME, re.IGNORECASE)
_BEARER = re.compile(r"(?P<head>\b(?:Bearer|Basic|Token)\s+)(?P<secret>[A-Za-z0-9._~+/=-]{4,})", re.IGNORECASE)


def is_secret_name(name: object) -> bool:
    """``name`` (a field, a header, a parameter) is named like a secret: its value is never shown."""
    return _WHOLE_SECRET_NAME.fullmatch(str(name)) is not None


def redact_secrets(text: str | None, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with the given ``secrets`` and everything that looks like one replaced by ``***``:
    URL passwords, values named like a secret (``?token=``, ``"api_key": "..."``,
    ``X-Auth-Token: ...``) and ``Authorization`` schemes' credentials (``Bearer ...``)."""
    text = redact_text(text, secrets)
    if not text:
        return text
    for pattern in (_URL_PASSWORD, _BEARER, _NAMED):
        text = pattern.sub(lambda m: m.group("head") + MASK, text)
    return text

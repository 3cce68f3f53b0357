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

Header values are never echoed at all: messages about a header name the header only.
"""

from __future__ import annotations

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

"""Keeping secrets out of output: the one place URLs and texts are redacted before printing.

Secrets are URL passwords (``mqtt://user:pw@host``), tokens in a URL's query, and HTTP
header values (``Authorization: Bearer ...``). Nothing that prints, logs, raises or
stores a URL or an error text that may quote one shows them, in any encoding:

- ``redact_url(url)``: the URL without user info, query or fragment, and with the value of
  every ``;name=value`` parameter named like a secret masked (Spark Connect's
  ``sc://host:15002/;token=...``; ``;user_id=`` stays readable). Never raises, even for a
  URL Python cannot parse (a port out of range), so it is safe in error messages.
- ``url_secrets(url)``: what in a URL is secret: the password (as written and decoded),
  ``user:password`` (what HTTP Basic auth base64-encodes), the query and each of its values,
  and the values of ``;name=value`` parameters named like a secret.
- ``redact_text(text, secrets)``: ``text`` with every secret replaced by ``***`` in each
  form it may take on its way back (``secret_forms``): as given, its escaped form as
  ``repr`` or JSON shows it, URL-encoded, base64 (standard and URL-safe, padded or not),
  and its longer words. Used on texts that come from elsewhere (an HTTP library's
  exception, an answer body that echoes a request's headers) before they reach a log,
  an error or a ledger row.
- ``guard_library_logs(secrets)``: masks those secrets in the log records of the HTTP
  libraries the project drives (httpx logs each request's URL at INFO, httpcore the
  answer's headers at DEBUG), whoever configured logging. Returns the function that
  forgets them again (a closed client's secrets need no guarding).
- ``is_secret_name(name)``: a field or header named like a secret (``api_key``, ``password``,
  ``X-Auth-Token``): a table shows ``***`` for its value.
- ``redact_secrets(text, secrets)``: for free text whose secrets nobody listed (a run's error,
  a quarantined payload shown on a web page): ``redact_text`` with ``secrets``, then every
  URL's password, every value of a query parameter or field named like a secret (token, key,
  password, secret, signature, auth) and every ``Authorization``/``Bearer`` value masked. A
  quoted value is masked whole, to its closing quote (JSON ``"password": "a b, c"``, a Python
  repr ``{'api_key': '...'}``, JSON escaped inside JSON). Time linear in the text: 10 MB of
  any text in about a second.
- ``redact_and_cut(text, limit, secrets)``: THE way a text that may quote a secret reaches a
  page, a log, a run row, a notification or a report shortened: masked first (the whole text),
  then cut to ``limit`` characters. A slice first would leave the head of a secret the cut went
  through, which no masking finds afterwards (tests/util/test_redaction_everywhere.py searches
  for such slices).
- ``redact_value(value, secrets)``: a structure (run details, a quality result, a message's
  document) with every text in it masked and every key named like a secret shown as ``***``.

A secret shorter than ``MIN_NEEDLE`` characters (``?x=1`` makes ``1`` one) is masked only where a
URL or ``name=value`` shows it, not in every place its characters occur.

Header values are never echoed at all: messages about a header name the header only.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit, urlunsplit

MASK = "***"
MIN_WORD = 6  # shorter words of a secret are too common to mask (a 6+ character token word is masked)
MIN_NEEDLE = 4  # a shorter secret is masked only where a URL or a name=value shows it (see _Needles)
ELLIPSIS = "…"

# the loggers of the libraries minikafka's HTTP connectors drive (a logger's filter sees only its own records)
LIBRARY_LOGGERS = ("httpx", "httpcore", "httpcore.connection", "httpcore.http11", "httpcore.http2",
                   "httpcore.proxy", "httpcore.socks", "hpack", "hpack.hpack", "hpack.table", "h11", "h2")


def redact_url(url: object) -> str:
    """``url`` as ``scheme://host[:port]/path``: no user info, query or fragment."""
    text = str(url)
    try:
        parts = urlsplit(text)
    except ValueError:  # e.g. an unbalanced '[' in the host: show nothing after the scheme
        scheme = text.split("://", 1)[0] if "://" in text else ""
        return f"{scheme}://{MASK}" if scheme else MASK
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, _mask_params(host), _mask_params(parts.path), "", ""))


def _mask_params(text: str) -> str:
    """``text`` with the value of each ``;name=value`` parameter named like a secret masked."""
    if ";" not in text:
        return text
    head, *params = text.split(";")
    shown = []
    for param in params:
        name, sep, _value = param.partition("=")
        shown.append(f"{name}={MASK}" if sep and is_secret_name(name.strip()) else param)
    return ";".join([head, *shown])


def _param_secrets(text: str) -> list[str]:
    """The values (as written and decoded) of the ``;name=value`` parameters of ``text`` named like a secret."""
    out = []
    for param in text.split(";")[1:]:
        name, sep, value = param.partition("=")
        if sep and is_secret_name(name.strip()):
            out += [value, unquote(value)]
    return out


def url_secrets(url: object) -> list[str]:
    """The parts of ``url`` that may be secret: its password (as written and decoded), the
    ``user:password`` pair HTTP Basic auth encodes, its query and each query value, its fragment."""
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return [str(url)]
    userinfo = parts.netloc.rpartition("@")[0]
    user, sep, password = userinfo.partition(":")
    out = [password, unquote(password), parts.query, parts.fragment]
    if sep:
        out += [userinfo, f"{unquote(user)}:{unquote(password)}"]
    for _name, value in parse_qsl(parts.query, keep_blank_values=True):
        out.append(value)
    for raw in parts.query.split("&"):
        out.append(raw.partition("=")[2])  # as written, percent-encoding and all
    out += _param_secrets(parts.netloc) + _param_secrets(parts.path)
    return [s for s in dict.fromkeys(out) if s]


def secret_forms(secret: str) -> set[str]:
    """The texts ``secret`` may appear as when something quotes it back: itself, trimmed,
    escaped (``repr``, JSON), URL-encoded, base64 (standard, URL-safe, with and without
    padding), and its words of ``MIN_WORD`` characters or more."""
    forms = {secret, secret.strip(), repr(secret)[1:-1], json.dumps(secret)[1:-1],
             quote(secret, safe=""), quote(secret), quote_plus(secret), unquote(secret)}
    raw = secret.encode("utf-8", "surrogatepass")
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        text = encoded.decode("ascii")
        forms.update((text, text.rstrip("=")))
    forms.update(word for word in secret.split() if len(word) >= MIN_WORD)
    if secret.startswith("Basic "):  # a configured Basic header: its decoded user:password too
        try:
            forms.add(base64.b64decode(secret[6:].strip(), validate=True).decode("utf-8"))
        except ValueError:
            pass
    return {f for f in forms if f}


class _Needles:
    """Every form of every secret, masked longest first (a longer form before its parts).

    A form shorter than ``MIN_NEEDLE`` characters (``?x=1`` makes ``1`` a secret) would mask
    every ``1`` of a text: it is masked only where a URL or a ``name=value`` shows it, right
    after ``=`` or ``:`` and before the end of the value."""

    def __init__(self, secrets: Iterable[str | None]):
        found: set[str] = set()
        for secret in secrets:
            if secret:
                found.update(secret_forms(secret))
        ordered = sorted(found, key=len, reverse=True)
        self.long = [f for f in ordered if len(f) >= MIN_NEEDLE]
        short = [f for f in ordered if len(f) < MIN_NEEDLE]
        self.short = (re.compile(r"(?<=[=:])(?:" + "|".join(map(re.escape, short)) + r")(?=[\s&@/#;,'\"<>)}\]]|$)")
                      if short else None)

    def __bool__(self) -> bool:
        return bool(self.long or self.short)

    def mask(self, text: str) -> str:
        for needle in self.long:
            if needle in text:
                text = text.replace(needle, MASK)
        if self.short is not None:
            text = self.short.sub(MASK, text)
        return text


def redact_text(text: str | None, secrets: Iterable[str | None]) -> str:
    """``text`` with each secret, in each of its ``secret_forms``, replaced by ``***``."""
    if not text:
        return text or ""
    return _Needles(secrets).mask(text)


class _LibraryLogFilter(logging.Filter):
    """Masks the guarded secrets in a record's message (its arguments merged in first)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._guarded: dict[int, list[str]] = {}
        self._next = 0
        self._needles = _Needles(())

    def guard(self, secrets: Iterable[str | None]) -> int:
        with self._lock:
            self._next += 1
            self._guarded[self._next] = [s for s in secrets if s]
            self._needles = _Needles(s for group in self._guarded.values() for s in group)
            return self._next

    def forget(self, key: int) -> None:
        with self._lock:
            if self._guarded.pop(key, None) is not None:
                self._needles = _Needles(s for group in self._guarded.values() for s in group)

    def filter(self, record: logging.LogRecord) -> bool:
        needles = self._needles
        if needles:
            try:
                text = record.getMessage()
            except Exception:  # a record that cannot be formatted is the library's bug: leave it
                return True
            clean = needles.mask(text)
            if clean != text:
                record.msg, record.args = clean, None
            if record.exc_text:
                record.exc_text = needles.mask(record.exc_text)
        return True


_FILTER = _LibraryLogFilter()


def guard_library_logs(secrets: Iterable[str | None]) -> Callable[[], None]:
    """Mask ``secrets`` (in every ``secret_forms`` form) in the records of ``LIBRARY_LOGGERS``.

    Installs one filter on each of those loggers (once per process); whatever level and
    handlers the application set, a record of those libraries leaves with the secrets
    masked. Returns the function that stops guarding these secrets (idempotent).
    """
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    key = _FILTER.guard(secrets)
    return lambda: _FILTER.forget(key)


# --- free text: secrets nobody listed -------------------------------------------------------
#
# Every scan below moves forward through the text and never goes back over what it passed:
# the time is linear in the text's length (a quarantined payload of megabytes is masked in a
# fraction of a second). The patterns start at a literal (``://``, a secret's name, a scheme
# word) and the spans they consume do not overlap.

_SECRET_WORD = r"(?:apikey|token|key|passw(?:or)?d|pwd|secret|signature|sig|authorization|auth|credentials?)"
_WHOLE_SECRET_NAME = re.compile(r"(?:[A-Za-z0-9_.-]*[_.-])?" + _SECRET_WORD, re.IGNORECASE)
# a name and its value, searched in the lower-cased text (several times faster than IGNORECASE; the
# positions are the same). The name's closing quote (escaped or not), '=' or ':', then the value:
# double- or single-quoted to its closing quote (escaped quotes inside skipped; the end of the line
# when it has none), quoted with an escaped quote (\" in JSON inside JSON) to the same, or bare: to
# white space, '&' (the next parameter) or markup, and in JSON or a repr also to , } ) ].
_NAMED = re.compile(
    r"(?<![a-z0-9])(?:a(?:pikey|uth(?:orization)?)|token|key|p(?:assw(?:or)?d|wd)|s(?:ecret|ig(?:nature)?)"
    r"|credentials?)"
    r"(?P<nq>\\*+[\"'])?[ \t]*+[:=][ \t]*+"
    r"(?:(?P<d>\")|(?P<s>')|(?P<e>\\++[\"']))?"
    r"(?P<value>(?(d)[^\"\\\n]*+(?:\\[^\n][^\"\\\n]*+)*+"
    r"|(?(s)[^'\\\n]*+(?:\\[^\n][^'\\\n]*+)*+"
    r"|(?(e)[^\n]*?(?=(?P=e)|\n|\Z)"
    r"|(?(nq)[^\s&\"<>,})\]]++|[^\s&\"<>]++)))))")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# scheme://user:password@host: the user stops at ':', the password at the last '@' before the path
_URL_PASSWORD = re.compile(r"(?P<head>://[^\s/\"<>:?#@]*+:)[^\s/\"<>]+(?=@)")
_BEARER = re.compile(r"\b(?:bearer|basic|token)\s+(?P<secret>[a-z0-9._~+/=%-]{4,})")  # in the lower-cased text
_SCHEME_WORDS = ("bearer", "basic", "token", "digest")


def is_secret_name(name: object) -> bool:
    """``name`` (a field, a header, a parameter) is named like a secret: its value is never shown."""
    return _WHOLE_SECRET_NAME.fullmatch(str(name)) is not None


def _mask_url_passwords(text: str) -> str:
    """Every ``scheme://user:password@host`` with the password masked (the password may hold
    ``: ? # @ ' , ;``; the last ``@`` before the path ends it)."""
    if "://" not in text:
        return text
    return _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)


def _lowered(text: str) -> str:
    """``text`` lower-cased, each character at its place (ASCII letters only, when a character's
    lower case is longer)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def _mask_bearer(text: str) -> str:
    """The credentials after ``Bearer``, ``Basic`` and ``Token`` masked."""
    out, pos = [], 0
    for m in _BEARER.finditer(_lowered(text)):
        out += [text[pos:m.start("secret")], MASK]
        pos = m.end("secret")
    out.append(text[pos:])
    return "".join(out)


def _prose_key(lowered: str, m: re.Match) -> bool:
    """The bare word ``key`` before ``:`` and an unquoted value (``invalid row: key: Field
    required``): a field named ``key`` in a message, not a credential. ``api_key:``, ``X-Api-Key:``,
    ``key=...``, ``"key": ...`` and ``key: "..."`` are still masked."""
    if not lowered.startswith("key", m.start()) or m.group("nq") or m.group("d") or m.group("s") or m.group("e"):
        return False
    if m.start() > 0 and lowered[m.start() - 1] in "_.-":
        return False
    return "=" not in lowered[m.start():m.start("value")]


def _mask_named_values(text: str) -> str:
    """The value of everything named like a secret masked: ``?token=...``, ``"password": "..."``,
    ``{'api_key': '...'}``, ``X-Auth-Token: ...``, ``password='...'``. A quoted value is masked
    to its closing quote, whatever it holds (, ; & ' } and spaces)."""
    out, pos = [], 0
    lowered = _lowered(text)
    for m in _NAMED.finditer(lowered):
        start, end = m.span("value")
        if start == end or end - start == len(MASK) and text.startswith(MASK, start):
            continue
        if _prose_key(lowered, m):
            continue
        if text[start:end].lower() in _SCHEME_WORDS and text.startswith(" " + MASK, end):
            continue  # 'Authorization: Bearer ***': its credentials were masked already
        out += [text[pos:start], MASK]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact_secrets(text: str | None, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with the given ``secrets`` and everything that looks like one replaced by ``***``:
    URL passwords, values named like a secret (``?token=``, ``"api_key": "..."``, ``{'password':
    '...'}``, ``X-Auth-Token: ...``) and ``Authorization`` schemes' credentials (``Bearer ...``).
    Takes time linear in the text."""
    text = redact_text(text, secrets)
    if not text:
        return text
    return _mask_named_values(_mask_bearer(_mask_url_passwords(text)))


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: cut, with ``…`` as its last one."""
    return text if len(text) <= limit else text[:max(limit - 1, 0)] + ELLIPSIS


def redact_and_cut(text: object, limit: int, secrets: Iterable[str | None] = (), *, first_line: bool = False) -> str:
    """The one way a text that may quote a secret reaches a page, a log, a run row or a message:
    masked first (``redact_secrets``, the whole text), then cut to ``limit`` characters (and to
    its first line with ``first_line``). Cutting first would show a secret the cut went through."""
    shown = redact_secrets(None if text is None else str(text), secrets)
    if first_line and shown:
        shown = shown.splitlines()[0] if shown.strip("\r\n") else ""
    return cut(shown, limit)


def redact_value(value: Any, secrets: Iterable[str | None] = ()) -> Any:
    """A structure (run details, a quality result, a notification's document) with every text in it
    masked (``redact_secrets``) and the value of every key named like a secret replaced by ``***``."""
    secrets = [s for s in secrets if s]
    return _redact_value(value, secrets)


def _redact_value(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact_secrets(value, secrets)
    if isinstance(value, dict):
        return {k: MASK if isinstance(k, str) and is_secret_name(k) and value[k] not in (None, "")
                and not isinstance(value[k], (dict, list, tuple, bool)) else _redact_value(value[k], secrets)
                for k in value}
    if isinstance(value, (list, tuple)):
        return [_redact_value(v, secrets) for v in value]
    return value

"""Every place in the package that raises, logs, prints or stores text built from an endpoint, a
URL, a URI, a master URL or a header goes through the one redaction helper (``util/redact.py``).

The search: each f-string placeholder on a line that raises, logs, prints or writes run details
and a quarantine reason, whose expression names such a thing, must be a call of ``redact_url`` /
``redact_text`` (or the worker's ``_redact``), or be listed below with where it was redacted.
A new message quoting ``{endpoint}`` raw fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from minikafka.util.redact import redact_text, redact_url, secret_forms, url_secrets

PACKAGE = Path(__file__).resolve().parents[2] / "minikafka"
SECRETISH = re.compile(r"(endpoint|url|uri|master|header|token|password|secret)", re.I)
SINK = re.compile(r"(raise |log\.|logger\.|print\(|echo\(|note\(|Error\(|warn\(|details|reason)")
REDACTED = ("redact_url(", "redact_text(", "redact_secrets(", "redact_and_cut(", "cut(", "self._redact(", "shown")

# placeholders whose value was redacted where it was made: (file, expression) -> why
ALREADY_REDACTED = {
    ("connectors/sinks.py", "self.endpoint"): "HTTPSink.endpoint = redact_url(endpoint)",
    ("connectors/http.py", "type(endpoint).__name__"): "only the type's name",
    ("connectors/mqtt.py", "type(url).__name__"): "only the type's name",
    ("connectors/mqtt.py", "url"): "inside redact_url(... f'mqtt://{url}') and urlparse, never shown raw",
    ("spark/session.py", "url"): "failures hold redact_url(f'spark://{host}:{port}')",
    ("spark/stages/stage.py", "dst: stg.open_staged(uri, rows) for dst, (uri, rows) in work.staged.items()"): "not text",
    ("pipelines/health.py", "', '.join(sorted(headers))"): "the headers' names, never their values",
}


def _placeholders():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "util/redact.py":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if not SINK.search(line):
                continue
            window = " ".join(lines[i:i + 3])  # a message may continue on the next lines
            for match in re.finditer(r"\{([^{}]+)\}", window):
                expr = match.group(1).split("!")[0].split(":")[0].strip() if "(" not in match.group(1) \
                    else match.group(1).strip()
                if SECRETISH.search(expr):
                    yield rel, i + 1, expr


def test_every_message_built_from_an_endpoint_url_or_header_goes_through_the_redaction_helper():
    raw = []
    for rel, line, expr in _placeholders():
        if expr.startswith(REDACTED) or (rel, expr) in ALREADY_REDACTED:
            continue
        if re.match(r"^\"?\w+\"?: ", expr) and "redact_url(" in expr:  # a dict literal of run details
            continue
        raw.append(f"minikafka/{rel}:{line}: {{{expr}}}")
    assert raw == [], "quote these through minikafka.util.redact:\n" + "\n".join(raw)


def test_the_search_finds_a_raw_endpoint_in_a_message():
    """The search itself can fail: a planted raw placeholder is found."""
    planted = 'raise DeliveryError(f"cannot reach {spec.endpoint}")'
    assert SINK.search(planted)
    assert [m.group(1) for m in re.finditer(r"\{([^{}]+)\}", planted) if SECRETISH.search(m.group(1))] == \
        ["spec.endpoint"]


@pytest.mark.parametrize("secret", ["hunter2/pass+Q7x", "tok en=1&x", "Bearer abc/def+ghi=="])
def test_redact_text_masks_every_encoding_of_a_secret(secret):
    import base64
    import json
    from urllib.parse import quote, quote_plus

    raw = secret.encode()
    for form in (secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1],
                 base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode().rstrip("=")):
        assert form in secret_forms(secret)
        assert redact_text(f"before {form} after", [secret]) == "before *** after"


def test_url_secrets_hold_the_basic_auth_pair_and_each_query_value_decoded():
    secrets = url_secrets("http://bob:p%40ss%2Fw@host/x?token=a%2Fb&other=c")
    assert "bob:p@ss/w" in secrets and "p@ss/w" in secrets and "a/b" in secrets and "a%2Fb" in secrets
    assert redact_url("http://bob:p%40ss@host:8/x?token=1#f") == "http://host:8/x"


# texts cut with a slice on purpose, none of them shown or kept as a message: (file, text) -> why
CUT_ON_PURPOSE = {
    ("quality/validate.py", "list(values or [])[:SAMPLE_VALUES]"): "a list of values, not a text",
    ("util/forkserver.py", ".encode()[:4000]"): "bytes to the fork server's control pipe, made into an error there",
    ("api/modes/pipes.py", "for p in self.pipelines)[:500]"): "topic names only",
    ("ledger/files/walfold.py", "frame[:FRAME_HEADER_BYTES]"): "bytes of a WAL frame",
    ("spark/loading/rowcheck.py", "raw[:10000]"): "a quarantined payload: the data itself",
    ("connectors/intake.py", "payload[:10000]"): "a quarantined payload: the data itself",
    ("connectors/ingest.py", "text.strip()[:PAYLOAD_CHARS]"): "a quarantined payload: the data itself",
    ("console/reads.py", "rows[:PAGE_ROWS]"): "a list of rows",
    ("ledger/lake/delta.py", "value[:_STATS_TEXT]"): "a text column's min value in a Delta file's statistics: "
                                                    "the data itself, which the table holds whole",
}
CUT = re.compile(r"\[:\s*(?:\d{3,}|[A-Z_]+)\s*\]")


def test_no_text_is_cut_with_a_slice_before_it_is_masked():
    """A text shown or kept shortened is cut by ``util.redact.redact_and_cut`` (masked first, then
    cut), never by a slice: a slice through a secret leaves its head that no masking finds."""
    found = []
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix not in (".py", ".html") or path.name == "redact.py":
            continue
        rel = path.relative_to(PACKAGE).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if path.suffix == ".html" and re.search(r"\[:\s*\d+\s*\]", line) or CUT.search(line):
                if not any(rel == f and text in line for f, text in CUT_ON_PURPOSE):
                    found.append(f"minikafka/{rel}:{number}: {line.strip()}")
    assert found == [], "cut these with util.redact.redact_and_cut (mask first, then cut):\n" + "\n".join(found)

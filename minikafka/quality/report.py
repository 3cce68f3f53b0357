"""The human-readable quality report of one run: a self-contained HTML file.

It shows what great-expectations' Data Docs show for a validation: per suite its topic,
policy and verdict; per expectation its arguments, the verdict, the observed value (for
table and aggregate checks) or the unexpected rows (count, share of the rows, and sample
failing values, for per-row checks), and the rows set aside under policy 'quarantine'.
No JavaScript, no external files: it opens from a mail attachment or a file share.

Reports live in ``quality-reports/<run id>.html`` beside the ledger (``prune
--reports-older-than`` removes old ones); the run's row in the run log holds the path
(``quality.report``), ``minikafka status`` and ``check`` print it.

Failing values are data: those of a column named like a secret (``api_key``, ``password``)
are shown as ``***`` (``shown_sample``, ``redacted_result``: the run log, this report, the
console and ``check`` all take them from here), and a secret inside any other value (a URL's
password, ``token=...``) is masked.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ..util.clock import utc_now
from ..util.redact import MASK, is_secret_name, redact_value
from .suite import expectation_columns

STYLE = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em;color:#222}
h1{font-size:1.4em;margin-bottom:.2em} h2{font-size:1.1em;margin-top:1.6em}
.meta{color:#555} table{border-collapse:collapse;margin-top:.5em;width:100%}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}
th{background:#f3f3f3} td.num{text-align:right;white-space:nowrap}
tr.FAIL td.verdict{background:#fdd;font-weight:bold} tr.pass td.verdict{background:#dfd}
.badge{display:inline-block;padding:1px 8px;border-radius:8px;font-size:.9em}
.badge.FAIL{background:#fdd} .badge.pass{background:#dfd}
code{background:#f6f6f6;padding:0 3px} ul.sample{margin:0;padding-left:1.2em}
"""


def on_secret_column(result: dict[str, Any]) -> bool:
    """The expectation checks a column named like a secret: its failing values are never shown."""
    named = [c.strip() for c in str(result.get("column") or "").split(",")]
    named += expectation_columns(result.get("arguments") or {})
    return any(c and is_secret_name(c) for c in named)


def shown_sample(result: dict[str, Any]) -> list[Any]:
    """The failing values of ``result`` as they may be shown: ``***`` each for a column named
    like a secret, else with the secrets inside them masked."""
    values = list(result.get("unexpected_sample") or [])
    if on_secret_column(result):
        return [MASK for _ in values]
    return [redact_value(v) for v in values]


def shown_observed(result: dict[str, Any]) -> Any:
    """The observed value (a table or aggregate check's) as it may be shown: a value of a column
    named like a secret is ``***`` (a number, a count, stays)."""
    value = result.get("observed_value")
    if on_secret_column(result) and value is not None and not isinstance(value, (bool, int, float)):
        return MASK
    return redact_value(value)


def redacted_result(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` as the run log and the report keep it: its failing and observed values as shown."""
    return {**result, "unexpected_sample": shown_sample(result), "observed_value": shown_observed(result)}


def describe(result: dict[str, Any]) -> str:
    """One result in a line: ``unexpected=1 of 4 (25.0%), e.g. 'http://x'`` for a per-row
    check, ``observed=4`` for a table or aggregate one."""
    count = result.get("unexpected_count")
    if count is None:
        return f"observed={shown_observed(result)}"
    total, pct = result.get("element_count"), result.get("unexpected_percent")
    text = f"unexpected={count}" + (f" of {total}" if total is not None else "")
    if pct is not None:
        text += f" ({pct:.1f}%)"
    examples = shown_sample(result)
    if count and examples:
        text += ", e.g. " + ", ".join(repr(v) for v in examples[:3])
    return text


def _text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _arguments(result: dict[str, Any]) -> str:
    args = result.get("arguments") or ({"column": result["column"]} if result.get("column") else {})
    if not args:
        return ""
    return "<br>".join(f"<code>{html.escape(k)}</code> = {html.escape(_text(v))}" for k, v in args.items())


def _observed(result: dict[str, Any]) -> str:
    if result.get("unexpected_count") is None:
        return html.escape(_text(shown_observed(result)))
    total = result.get("element_count")
    text = f"{result['unexpected_count']} unexpected" + (f" of {total} rows" if total is not None else "")
    if result.get("missing_count"):
        text += f"; {result['missing_count']} missing (null)"
    return html.escape(text)


def _percent(result: dict[str, Any]) -> str:
    pct = result.get("unexpected_percent")
    return "" if pct is None else f"{pct:.2f}%"


def _sample(result: dict[str, Any]) -> str:
    values = shown_sample(result)
    if not values:
        return ""
    return "<ul class='sample'>" + "".join(f"<li><code>{html.escape(repr(v))}</code></li>" for v in values) + "</ul>"


def _suite_section(outcome: Any) -> str:
    verdict = "pass" if outcome.success else "FAIL"
    quarantined = len(getattr(outcome, "bad_rows", {}) or {})
    head = (f"<h2>Suite {html.escape(outcome.suite)} <span class='badge {verdict}'>"
            f"{'passed' if outcome.success else 'failed'}</span></h2>"
            f"<p class='meta'>topic <code>{html.escape(str(outcome.topic))}</code>, policy "
            f"<code>{html.escape(outcome.policy)}</code>"
            + (f", {quarantined} row(s) set aside in the quarantine" if quarantined else "")
            + f", {sum(1 for r in outcome.results if not r['success'])} of {len(outcome.results)} "
            "expectation(s) failed</p>")
    rows = []
    for r in outcome.results:
        mark = "pass" if r["success"] else "FAIL"
        count = "" if r.get("unexpected_count") is None else str(r["unexpected_count"])
        rows.append(
            f"<tr class='{mark}'><td>{html.escape(r['expectation'])}</td><td>{_arguments(r)}</td>"
            f"<td class='verdict'>{'passed' if r['success'] else 'FAILED'}</td><td>{_observed(r)}</td>"
            f"<td class='num'>{count}</td><td class='num'>{_percent(r)}</td><td>{_sample(r)}</td></tr>")
    table = ("<table><tr><th>expectation</th><th>arguments</th><th>result</th><th>observed</th>"
             "<th>unexpected</th><th>unexpected %</th><th>sample failing values</th></tr>"
             + "".join(rows) + "</table>")
    return head + table


def render_report(run_id: str, stage: str, outcomes: list[Any], *, rows_in: int | None = None,
                  created_at: str | None = None) -> str:
    """The report's HTML text (see the module docstring)."""
    failed = [o for o in outcomes if not o.success]
    verdict = "pass" if not failed else "FAIL"
    summary = (f"{len(outcomes)} suite(s), " + (f"{len(failed)} failed" if failed else "all passed")
               + (f"; {rows_in} input row(s)" if rows_in is not None else ""))
    return (
        "<!doctype html><html lang='en'><meta charset='utf-8'>"
        f"<title>minikafka quality: {html.escape(stage)} {html.escape(run_id)}</title><style>{STYLE}</style>"
        f"<h1>Quality report: stage {html.escape(stage)} <span class='badge {verdict}'>"
        f"{'passed' if not failed else 'failed'}</span></h1>"
        f"<p class='meta'>run <code>{html.escape(run_id)}</code>, written {html.escape(created_at or utc_now())}; "
        f"{html.escape(summary)}</p>"
        + "".join(_suite_section(o) for o in outcomes) + "</html>\n")


def write_report(path: Path, run_id: str, stage: str, outcomes: list[Any], *, rows_in: int | None = None) -> Path:
    """Write the report of one run's checks to ``path`` (its directory is created); return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(run_id, stage, outcomes, rows_in=rows_in), encoding="utf-8")
    return path

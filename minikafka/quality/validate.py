"""Run suites on a stage's output DataFrame with great-expectations (Spark datasource).

Importing this module imports great-expectations (``gx_env.import_gx``): the stage host
imports it before it forks a stage that has a suite.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..errors import QualityCheckError
from ..util.redact import redact_and_cut
from ..util.results import Result
from .gx_env import context, import_gx
from .report import describe, redacted_result, write_report  # noqa: F401  (stage.py writes the report through this module)
from .suite import Suite, check_arguments, expectation_class, expectation_columns, expectation_label, is_row_level

import_gx()

ROW_KEY = "_mk_row"


@dataclass
class SuiteOutcome(Result):
    """One suite's verdict on one output."""

    suite: str
    topic: str | None
    policy: str
    success: bool
    results: list[dict[str, Any]]
    bad_rows: dict[int, list[str]] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "topic": self.topic, "policy": self.policy, "success": self.success,
                "results": self.results, "quarantined_rows": len(self.bad_rows), "seconds": round(self.seconds, 3)}

    def summary(self) -> str:
        failed = sum(not r["success"] for r in self.results)
        return (f"suite {self.suite} on {self.topic}: {'passed' if self.success else 'failed'} "
                f"({failed} of {len(self.results)} expectation(s) failed, policy {self.policy})")

    @property
    def table_failures(self) -> list[dict[str, Any]]:
        return [r for r in self.results if not r["success"] and not r["row_level"]]


SAMPLE_VALUES = 10  # failing values kept per expectation (run log and report)
SAMPLE_CHARS = 200  # of each sample value
HIDDEN_ARGUMENTS = {"batch_id", "result_format", "catch_exceptions", "include_config", "meta", "notes",
                    "rendered_content", "id"}


def arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    """An expectation's arguments as the suite gave them (GX's bookkeeping left out)."""
    return {k: _jsonable(v) for k, v in kwargs.items() if k not in HIDDEN_ARGUMENTS and v is not None}


def sample(values: Any) -> list[Any]:
    """Up to SAMPLE_VALUES failing values, long text masked, then cut to SAMPLE_CHARS (a secret
    the cut went through would show its head)."""
    out = []
    for value in list(values or [])[:SAMPLE_VALUES]:
        value = _jsonable(value)
        if isinstance(value, str) and len(value) > SAMPLE_CHARS:
            value = redact_and_cut(value, SAMPLE_CHARS + 1)
        out.append(value)
    return out


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


def raised_exceptions(info: Any) -> list[str]:
    """The messages of exceptions in a GX result's ``exception_info``.

    GX 1.x gives either one ``{raised_exception, exception_message, ...}`` dict or a dict
    of them keyed by metric id (GX 1.24); both are read.
    """
    if not isinstance(info, dict):
        return []
    if "raised_exception" in info:
        if not info.get("raised_exception"):
            return []
        return [str(info.get("exception_message") or info.get("exception_traceback") or "unknown error")]
    found = []
    for key, value in info.items():
        for message in raised_exceptions(value):
            found.append(f"{key}: {message}" if isinstance(key, str) and key not in message else message)
    return found


def _validate(df, name: str, expectations: list, result_format: dict[str, Any]):
    """One great-expectations validation of ``df``; the suite and asset are removed afterwards."""
    gx = import_gx()
    ctx = context()
    tag = f"{name}-{uuid.uuid4().hex[:8]}"
    # persist=False: the stage persisted the frame it hands over (``_apply_quality``); a second
    # cache of the same rows would cost a round trip and the engine's memory, and outlive the check
    source = ctx.data_sources.add_or_update_spark(name="minikafka", persist=False)
    asset = source.add_dataframe_asset(name=tag)
    batch_definition = asset.add_batch_definition_whole_dataframe("whole")
    gx_suite = gx.ExpectationSuite(name=tag)
    for expectation in expectations:
        gx_suite.add_expectation(expectation)
    gx_suite = ctx.suites.add(gx_suite)
    try:
        batch = batch_definition.get_batch(batch_parameters={"dataframe": df})
        return batch.validate(gx_suite, result_format=result_format)
    finally:
        ctx.suites.delete(gx_suite.name)
        source.delete_asset(asset.name)


def run_suite(df, suite: Suite, *, rows_in: int, stage: str | None = None, keyed=None,
              row_key: str = ROW_KEY) -> SuiteOutcome:
    """Validate ``df`` against ``suite``.

    ``df`` must hold exactly the topic's columns (its model's fields, in order): that is all
    the expectations see, so table-level ones (column set, count, order) judge the real
    columns. Under policy 'quarantine', ``keyed`` is the same rows plus ``row_key``; the
    row-level expectations that failed are run again on it, only to learn which rows failed
    (``SuiteOutcome.bad_rows``, keyed by ``row_key``). The verdicts all come from ``df``.

    Raises:
        QualityCheckError: an expectation raised instead of giving a verdict (names stage, suite).
    """
    t0 = time.perf_counter()
    validation, verdicts = _validate_sampling_failures(df, suite, rows_in)
    results, to_locate = [], []
    for r in verdicts:
        cfg = r.expectation_config
        kwargs = cfg.kwargs
        row_level = is_row_level(cfg.type)
        messages = raised_exceptions(r.exception_info)
        if messages:
            raise QualityCheckError(stage, suite.name, cfg.type, messages)
        results.append(result_row(r))
        if not r.success and row_level and suite.policy == "quarantine":
            to_locate.append((cfg.type, dict(kwargs), (r.result or {}).get("unexpected_count")))
    bad_rows = _locate(keyed, row_key, suite, stage, to_locate) if to_locate else {}
    return SuiteOutcome(suite.name, suite.topic, suite.policy, bool(validation.success), results, bad_rows,
                        time.perf_counter() - t0)


def result_row(r) -> dict[str, Any]:
    """One expectation's result as the run log and the report keep it (the failing values of a
    column named like a secret as ``***``: ``report.redacted_result``)."""
    cfg = r.expectation_config
    res = r.result or {}
    return redacted_result({
        "expectation": cfg.type, "column": ", ".join(expectation_columns(cfg.kwargs)) or None,
        "success": bool(r.success), "row_level": is_row_level(cfg.type),
        "observed_value": _jsonable(res.get("observed_value")),
        "unexpected_count": res.get("unexpected_count"), "unexpected_percent": res.get("unexpected_percent"),
        "element_count": res.get("element_count"), "missing_count": res.get("missing_count"),
        "arguments": arguments(cfg.kwargs), "unexpected_sample": sample(res.get("partial_unexpected_list")),
    })


def _expectations(suite: Suite, rows_in: int) -> list:
    """The suite's expectations as great-expectations objects (new ones on every call: a GX
    suite takes its expectations over), the row-count check last."""
    gx = import_gx()
    check_arguments(suite)  # a suite loaded without great-expectations: its arguments' check is here
    expectations = [expectation_class(e.type)(**e.kwargs) for e in suite.expectations]
    if suite.min_ratio is not None or suite.max_ratio is not None:
        low = math.floor(rows_in * suite.min_ratio) if suite.min_ratio is not None else None
        high = math.ceil(rows_in * suite.max_ratio) if suite.max_ratio is not None else None
        expectations.append(gx.expectations.ExpectTableRowCountToBeBetween(min_value=low, max_value=high))
    return expectations


SUMMARY = {"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_VALUES}
# the same, without the failing values: GX's query for them becomes a LIMIT 0 that Spark's
# optimizer answers without running a job (it still costs one round trip to the engine)
COUNTS_ONLY = {"result_format": "SUMMARY", "partial_unexpected_count": 0}


def _validate_sampling_failures(df, suite: Suite, rows_in: int):
    """(the validation, its results) as one validation with ``SUMMARY`` would give them, with
    fewer Spark queries.

    great-expectations asks Spark for a sample of failing values per row-level expectation,
    one query each, even when there are none. The first validation asks for no sample: an
    expectation that passed with no unexpected value has an empty sample anyway, so its
    result is final. Every other result (a failure, or unexpected values under ``mostly``)
    is replaced by the result of a second validation of just those expectations, with the
    sample, as before. The overall verdict does not depend on samples.
    """
    validation = _validate(df, suite.name, _expectations(suite, rows_in), COUNTS_ONLY)
    results = list(validation.results)
    again = [i for i, r in enumerate(results) if not _final_without_sample(r)]
    if again:
        wanted: dict[str, list[int]] = {}  # identity -> the places of its results (a suite may repeat one)
        for i in again:
            wanted.setdefault(_identity(results[i].expectation_config), []).append(i)
        left = {key: len(places) for key, places in wanted.items()}
        chosen = []
        for expectation in _expectations(suite, rows_in):
            key = _identity(expectation.configuration)
            if left.get(key):
                left[key] -= 1
                chosen.append(expectation)
        for r in _validate(df, suite.name, chosen, SUMMARY).results:
            results[wanted[_identity(r.expectation_config)].pop(0)] = r
    return validation, results


def _final_without_sample(r) -> bool:
    """A result that a validation with samples gives the same: passed, no unexpected value, no error."""
    if not r.success or raised_exceptions(r.exception_info):
        return False
    count = (r.result or {}).get("unexpected_count")
    return not count


def _identity(cfg) -> str:
    """An expectation's type and arguments (GX's bookkeeping, such as its id, left out)."""
    return json.dumps([cfg.type, arguments(cfg.kwargs)], sort_keys=True, default=str)


def _locate(keyed, row_key: str, suite: Suite, stage: str | None, failed: list) -> dict[int, list[str]]:
    """Row key -> labels of the failed row-level expectations, from a second run on ``keyed``."""
    if keyed is None:
        raise ValueError("policy 'quarantine' needs the keyed frame to map failing rows back")
    expectations = [expectation_class(type_name)(**kwargs) for type_name, kwargs, _count in failed]
    fmt = {"result_format": "COMPLETE", "unexpected_index_column_names": [row_key],
           "return_unexpected_index_query": False}
    validation = _validate(keyed, suite.name, expectations, fmt)
    bad_rows: dict[int, list[str]] = {}
    for r, (_type, _kwargs, count) in zip(validation.results, failed, strict=True):
        cfg = r.expectation_config
        messages = raised_exceptions(r.exception_info)
        if messages:
            raise QualityCheckError(stage, suite.name, cfg.type, messages)
        keys = [int(item[row_key]) for item in (r.result or {}).get("unexpected_index_list") or []]
        if count is not None and len(keys) != count:
            raise QualityCheckError(stage, suite.name, cfg.type,
                                    [f"{count} unexpected row(s), but {len(keys)} could be located"])
        label = expectation_label(cfg.type, cfg.kwargs)
        for key in keys:
            bad_rows.setdefault(key, []).append(label)
    return bad_rows

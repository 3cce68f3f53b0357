"""What a pipeline run returns: one ``StageOutcome`` per stage, gathered in a ``PipelineRun``.

Both are plain results (``util.results.Result``): the scheduler fills them, the launchers make
the outcomes, the CLI prints ``table()`` or ``as_dict()`` (``run --json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..ledger.consuming import runview
from ..util.redact import redact_and_cut
from ..util.results import Result


@dataclass
class StageOutcome(Result):
    """What happened to one stage in a pipeline run."""

    name: str
    status: str  # succeeded | partial | failed | skipped
    seconds: float = 0.0
    run: dict | None = None
    error: str | None = None
    quarantined_to: list[str] = field(default_factory=list)  # set when every row went to the quarantine

    def summary(self) -> str:
        rows = (self.run or {}).get("rows_out")
        told = f", {rows:,} row(s) out" if isinstance(rows, int) else ""
        return f"stage {self.name}: {self.status}{told}, {self.seconds:.1f} s" + (f": {self.error}" if self.error else "")

    def resumed_note(self) -> str | None:
        """The line saying the run resumed after interrupted runs of the stage (their process
        gone; ``details.resumes_after``), None when it did not."""
        after = (_parsed((self.run or {}).get("details")) or {}).get("resumes_after")
        if not after:
            return None
        more = f" (and {len(after) - 1} earlier)" if len(after) > 1 else ""
        return f"   {self.name}: resumed after interrupted run {after[-1]}{more}; nothing of it was committed"

    @property
    def quality(self) -> dict:
        """The run's quality results ({suites: [...], report: path}); {} without suites."""
        return _parsed((self.run or {}).get("quality")) or {}

    def failed_checks(self) -> list[tuple[dict, dict]]:
        """(suite, result) of every expectation that failed in this stage's run."""
        return [(suite, r) for suite in self.quality.get("suites", []) for r in suite.get("results", [])
                if not r.get("success")]

    def as_dict(self) -> dict:
        """The stage's entry in ``run --json`` (keys documented in the command's help)."""
        r = self.run or {}
        return {
            "stage": self.name, "status": self.status, "run_id": r.get("run_id"), "seconds": round(self.seconds, 3),
            **{k: r.get(k, 0) or 0 for k in ROW_COUNTS},
            "rows_by_topic": runview.rows_by_topic({"details": _parsed(r.get("details"))}),
            "error": self.error, "quarantined_to": self.quarantined_to,
            "report": self.quality.get("report"),
            "failed_expectations": [
                {"suite": suite["suite"], "policy": suite["policy"], "expectation": res["expectation"],
                 "column": res.get("column"), "unexpected_count": res.get("unexpected_count"),
                 "unexpected_percent": res.get("unexpected_percent"), "observed_value": res.get("observed_value"),
                 "unexpected_sample": res.get("unexpected_sample", [])}
                for suite, res in self.failed_checks()],
        }


ROW_COUNTS = ("rows_in", "rows_out", "rows_duplicate", "rows_quarantined", "rows_failed")
DRY_RUN_NOTE = "dry run: nothing was written (the counts are what 'run' would do now)"


def _parsed(value):
    """A run-log JSON column as a value (rows read back are parsed; a dry run's row is text)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


@dataclass
class PipelineRun(Result):
    pipeline: str
    outcomes: list[StageOutcome] = field(default_factory=list)
    seconds: float = 0.0
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return all(o.status in ("succeeded", "partial") for o in self.outcomes)

    @property
    def failed(self) -> list[StageOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def nothing_to_do(self) -> bool:
        """No selected stage had a row to read (every run was empty)."""
        return self.ok and not any((o.run or {}).get("rows_in") for o in self.outcomes)

    def as_dict(self) -> dict:
        """``run --json``: {pipeline, ok, dry_run, nothing_to_do, seconds, stages: [...]}."""
        return {"pipeline": self.pipeline, "ok": self.ok, "dry_run": self.dry_run,
                "nothing_to_do": self.nothing_to_do, "seconds": round(self.seconds, 3),
                "stages": [o.as_dict() for o in self.outcomes]}

    def summary(self) -> str:
        return (f"pipeline {self.pipeline}: {len(self.outcomes)} stage(s), {len(self.failed)} failed, "
                f"{self.seconds:.1f} s" + (" (dry run)" if self.dry_run else ""))

    def warnings(self) -> list[str]:
        """Lines naming every failed expectation of a stage that did not fail (policy warn or
        quarantine), with how many rows and a sample, and the report's path."""
        from ..quality.report import describe

        lines = []
        for o in self.outcomes:
            if o.status == "failed":
                continue
            for suite in o.quality.get("suites", []):
                bad = [r for r in suite.get("results", []) if not r.get("success")]
                if not bad:
                    continue
                fate = {"warn": "the rows were committed anyway",
                        "quarantine": f"{suite.get('quarantined_rows', 0)} row(s) set aside in the quarantine"}
                lines.append(f"WARNING {o.name}: suite {suite['suite']} ({suite['policy']}): {len(bad)} of "
                             f"{len(suite['results'])} expectation(s) failed; "
                             f"{fate.get(suite['policy'], 'see the report')}")
                for r in bad:
                    lines.append(f"    {r['expectation']}({r.get('column') or ''}) {describe(r)}")
            if o.failed_checks() and o.quality.get("report"):
                lines.append(f"    report: {o.quality['report']}")
        return lines

    def table(self) -> str:
        lines = [DRY_RUN_NOTE] if self.dry_run else []
        lines.append(runview.table_heading())  # the columns of 'status', in its order
        for o in self.outcomes:
            lines.append(runview.table_cells({**(o.run or {}), "stage": o.name, "status": o.status,
                                              "duration_s": o.seconds}))
        for o in self.outcomes:
            if o.quarantined_to:
                lines.append(f"QUARANTINED {o.name}: every row it produced went to the quarantine "
                             f"({(o.run or {}).get('rows_quarantined', 0)}), nothing was "
                             f"{'to be ' if self.dry_run else ''}committed: minikafka quarantine {o.quarantined_to[0]}")
        lines += self.warnings()
        for o in self.failed:
            lines.append(f"FAILED {o.name}: {redact_and_cut(o.error, 1500)}")
            if o.quality.get("report"):
                lines.append(f"    report: {o.quality['report']}")
        verdict = "ok" if self.ok else f"{len(self.failed)} stage(s) failed"
        if self.nothing_to_do:
            verdict += ", nothing to do: no stage had new rows"
        lines.append(f"total {self.seconds:.1f}s: {verdict}" + (" (dry run: nothing was written)" if self.dry_run else ""))
        return "\n".join(lines)

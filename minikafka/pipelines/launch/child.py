"""A stage as a process of its own, the part every such launcher shares.

``ChildLauncher`` starts the command its subclass makes (spark-submit: ``submit``; a client of
the warm engine: ``client``), with the arguments of the stage's ``StageCall``, waits for it,
and reads the run's row back (from the JSON line it prints, else from the ledger). A process
that fails before its stage wrote a run row gets one here. ``Children`` holds a run's running
processes so Ctrl-C can kill them and wait until none can still start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import threading
import time

from ...api.source import Source
from ...ledger.consuming import INTERRUPTED, decoded
from ...util.procs import kill_group, popen_tied
from ..definition import PipelineDefinition, StageDefinition
from ..failures import record_failed_run
from ..opening import run_row, stage_ids
from ..results import StageOutcome
from .call import StageCall

log = logging.getLogger("minikafka.pipelines")


class Children:
    """The running stage processes of a run, whether Ctrl-C stopped it, and the launches in
    flight (so Ctrl-C's clean-up waits until no process of the run can still start)."""

    def __init__(self):
        self.running: dict[str, object] = {}
        self.phases: dict[str, str] = {}  # stage -> what ran it ('spark-submit', ...), once launched
        self.interrupted = threading.Event()
        self._active = 0
        self._idle = threading.Condition()

    @contextlib.contextmanager
    def launching(self):
        """Around one stage's launch: yields False when Ctrl-C came first (start nothing)."""
        with self._idle:
            self._active += 1
        try:
            yield not self.interrupted.is_set()
        finally:
            with self._idle:
                self._active -= 1
                self._idle.notify_all()

    def interrupt(self) -> None:
        """Ctrl-C: no stage process starts from now on, and those running are killed."""
        self.interrupted.set()
        for proc in list(self.running.values()):
            kill_group(proc)

    def wait_idle(self) -> None:
        """Until no launch is in flight (after ``interrupted`` is set, none begins)."""
        with self._idle:
            self._idle.wait_for(lambda: self._active == 0)


class ChildLauncher:
    """One stage, one process: the command ``command()`` makes, run by ``run_child``.

    ``label`` names what runs it in errors and the run log ('spark-submit', "the stage's
    client"); ``needs_java``: Java is checked first (spark-submit would only say JAVA_HOME).
    """

    label = "a stage process"
    needs_java = False
    width = 1

    def __init__(self, defn: PipelineDefinition, *, registered: dict[tuple[str, str], int], dry_run: bool,
                 staging: str | None, echo, width: int = 1, logical_date=None):
        self.defn, self.registered, self.dry_run, self.staging, self.echo = defn, registered, dry_run, staging, echo
        self.width, self.logical_date = width, logical_date

    def call(self, sd: StageDefinition, run_id: str, **given) -> StageCall:
        """The stage's ``StageCall`` (``given``: what this launcher adds, e.g. ``remote``)."""
        return StageCall.of(self.defn, sd, run_id, dry_run=self.dry_run, staging=self.staging,
                            consumer_ids=stage_ids(self.registered, sd), logical_date=self.logical_date, **given)

    def command(self, sd: StageDefinition, run_id: str, pending: int | None) -> tuple[list[str], StageCall]:
        raise NotImplementedError

    def popen(self, sd: StageDefinition, run_id: str):
        """What starts the process (None: ``popen_tied``)."""
        return None

    def starting(self, sd: StageDefinition) -> None:
        """The scheduler is about to launch ``sd`` (a launcher may warm what its readers need)."""

    def launch(self, sd: StageDefinition, run_id: str, procs: Children, *, pending: int | None = None) -> StageOutcome:
        """Run the stage's process to its end (``pending``: rows it is known to read, None: unknown)."""
        cmd, call = self.command(sd, run_id, pending)
        return run_child(self.defn, sd, cmd, run_id, self.dry_run, self.echo, procs, self.needs_java,
                         self.popen(sd, run_id), env=call.env())


def run_child(defn: PipelineDefinition, sd: StageDefinition, cmd: list[str], run_id: str, dry_run: bool, echo,
               procs: Children, needs_java: bool, popen, env: dict[str, str]) -> StageOutcome:
    """Run one stage's process (spark-submit, or a client of the engine); read back its run row.

    ``popen``: starts the process instead of ``popen_tied``, with its signature and a
    Popen-like result (pid, communicate(), returncode, its own process group): the stage
    host's forked children (``stagehost``)."""
    from ...spark.session import SparkSetupError, check_java

    t0 = time.perf_counter()
    launcher = "spark-submit" if needs_java else "the stage's client"
    try:
        if needs_java:
            check_java()  # spark-submit itself would only say "JAVA_HOME is not set"
    except SparkSetupError as exc:
        row = None if dry_run else record_failed_run(defn, run_id, str(exc), sd, details={"phase": "launch"})
        return StageOutcome(sd.name, "failed", time.perf_counter() - t0, row, str(exc))
    if log.isEnabledFor(logging.DEBUG):
        import shlex

        log.debug("stage %s: %s", sd.name, shlex.join(cmd))
    # the stage dies with this runner: a killed nightly leaves no orphan still staging or committing
    try:
        proc = (popen or popen_tied)(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        error = f"{launcher} did not launch ({cmd[0]}): {exc.strerror or exc}"
        row = None if dry_run else record_failed_run(defn, run_id, error, sd, details={"phase": "launch"})
        return StageOutcome(sd.name, "failed", time.perf_counter() - t0, row, error)
    procs.running[sd.name], procs.phases[sd.name] = proc, launcher
    if procs.interrupted.is_set():  # Ctrl-C came while it started
        kill_group(proc)
    try:
        stdout, stderr = proc.communicate()
    finally:
        procs.running.pop(sd.name, None)
    seconds = time.perf_counter() - t0
    if procs.interrupted.is_set():  # killed by Ctrl-C: its run's row is the clean-up's to write
        return StageOutcome(sd.name, "interrupted", seconds, None, INTERRUPTED)
    if os.environ.get("MINIKAFKA_VERBOSE"):  # the CLI's --verbose: show the stage's own output
        echo(stderr.rstrip())
    summary = last_json(stdout)
    if proc.returncode == 0 and summary and summary.get("run_id") == run_id:
        row = decoded(dict(summary))  # the run's row as the stage committed it: nothing to read back
    else:
        with Source(str(defn.source)) as source:
            row = run_row(source, run_id)
    details = (summary or {}).get("details")
    if summary and (row is None or (isinstance(details, dict) and details.get("chunks"))):
        row = summary  # a chunked stage prints the sum of its chunks
    if proc.returncode != 0 and (row or {}).get("status") in ("running", "interrupted") \
            and row.get("finished_at") is None and proc.returncode < 0:
        # killed by a signal after its run's 'running' row (SIGKILL: the OOM killer, kill -9)
        error = f"the stage's process was killed by {signal_name(-proc.returncode)} (the OOM killer, kill -9)"
        if not dry_run:
            row = record_failed_run(defn, run_id, error, sd, details={**(row.get("details") or {}),
                                                                      "phase": launcher}, status="interrupted",
                                    keep=True) or row
        return StageOutcome(sd.name, "failed", seconds, row, error)
    if proc.returncode != 0:
        error = (row or {}).get("error") or cause(stderr, proc.returncode, launcher)
        if row is None and not dry_run:  # it failed before the stage wrote its run: record it here
            row = record_failed_run(defn, run_id, error, sd, details={"phase": launcher,
                                                                      "exit_code": proc.returncode})
        return StageOutcome(sd.name, "failed", seconds, row, error)
    if row is None:
        error = (f"{sd.job_file()} exited without running the stage: does it end with "
                 "'raise SystemExit(minikafka.job.main())'?")
        if not dry_run:
            row = record_failed_run(defn, run_id, error, sd, details={"phase": launcher, "exit_code": 0})
        return StageOutcome(sd.name, "failed", seconds, row, error)
    return StageOutcome(sd.name, (row or {}).get("status", "succeeded"), seconds, row)


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9 (the number itself for one Python does not know)."""
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN) ")


def cause(stderr: str, code: int, launcher: str = "spark-submit", lines: int = 15) -> str:
    """What made spark-submit (or a stage's client) fail: the job's own ``minikafka:`` message, else the last
    lines that are not Spark's INFO/WARN log lines or stack frames."""
    text = stderr.strip().splitlines()
    ours = [line for line in text if line.startswith("minikafka: ")]
    if ours:
        return "\n".join(line[len("minikafka: "):] for line in ours[-lines:])
    keep = [line for line in text if line.strip() and not LOG_LINE.match(line) and not line.startswith("\tat ")]
    if not keep:
        return f"{launcher} exited with code {code} (run with --verbose to see its output)"
    return "\n".join(keep[-lines:])

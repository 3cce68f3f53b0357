"""The contract between the scheduler and a stage's process: one ``StageCall``, built and parsed here.

dagster's ``ExecuteStepArgs``: every launcher that starts a stage as a process (spark-submit, a
client of the warm engine, a child of the stage host) gives it ``call.to_argv()`` after its own
program, and the job file's ``minikafka.job.main`` reads it back with ``StageCall.from_argv``.
Nothing else builds or parses a stage process's arguments.

The arguments::

    JOB --pipeline FILE --stage NAME [--run-id ID] [--source FILE]
        [--remote sc://HOST:PORT | --remote-env] [--py-files ZIP]
        [--staging URI] [--consumer-id TOPIC=ID ...] [--logical-date YYYY-MM-DD] [--dry-run]

An engine URL that carries a secret (a token) never goes on the command line (``ps`` and
``/proc`` show it): ``to_argv`` says ``--remote-env`` and ``env()`` puts the URL in
``$MINIKAFKA_ENGINE_URL``, where ``from_argv`` finds it.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from datetime import date

from ...errors import InvalidSettingError
from ...spark.engine import ENGINE_URL_ENV
from ...util.clock import logical_date as logical_date_of
from ...util.procs import child_env
from ...util.redact import url_secrets
from ..definition import PipelineDefinition, StageDefinition


@dataclass(frozen=True)
class StageCall:
    """What one stage's process is asked to do.

    ``job``: the job file run; ``pipeline``/``stage``: which stage; ``run_id``: its run's id
    (the scheduler's, so a failure before the stage is recorded under the same id);
    ``source``: the ledger; ``staging``: a URI every node sees; ``consumer_ids``: {input: id}
    of the stage's consumer, registered by the scheduler (the process then registers nothing
    and opens only the stage's topics); ``remote``: run as a client of the engine at that URL;
    ``py_files``: a zip of the code to ship to the engine; ``dry_run``: commit nothing;
    ``logical_date``: the run's logical date (the stage's ``ctx.logical_date``; None: the
    stage's own UTC start date).
    """

    job: str
    pipeline: str
    stage: str
    run_id: str | None = None
    source: str | None = None
    staging: str | None = None
    consumer_ids: dict[str, int] = field(default_factory=dict)
    remote: str | None = None
    py_files: str | None = None
    dry_run: bool = False
    logical_date: date | None = None

    @classmethod
    def of(cls, defn: PipelineDefinition, sd: StageDefinition, run_id: str, **given) -> StageCall:
        """The call of stage ``sd`` of ``defn`` for run ``run_id`` (``given``: the other fields)."""
        return cls(job=str(sd.job_file()), pipeline=str(defn.path), stage=sd.name, run_id=run_id,
                   source=str(defn.source), **given)

    def to_argv(self) -> list[str]:
        """The process's arguments, after its program (``python``, or spark-submit and its options)."""
        argv = [self.job, "--pipeline", self.pipeline, "--stage", self.stage]
        argv += ["--run-id", self.run_id] if self.run_id else []
        argv += ["--source", self.source] if self.source else []
        if self.remote:
            argv += ["--remote-env"] if url_secrets(self.remote) else ["--remote", self.remote]
        argv += ["--py-files", self.py_files] if self.py_files else []
        argv += ["--staging", self.staging] if self.staging else []
        argv += [arg for name, cid in sorted(self.consumer_ids.items()) for arg in ("--consumer-id", f"{name}={cid}")]
        argv += ["--logical-date", self.logical_date.isoformat()] if self.logical_date else []
        return argv + (["--dry-run"] if self.dry_run else [])

    def env(self) -> dict[str, str]:
        """The process's environment: this one's (``child_env``), and the engine's URL in
        ``$MINIKAFKA_ENGINE_URL`` for a client of an engine."""
        env = child_env()
        if self.remote is not None:
            env[ENGINE_URL_ENV] = self.remote
        return env

    @classmethod
    def from_argv(cls, argv: list[str] | None = None, *, job: str = "") -> StageCall:
        """Parse a stage process's arguments (after the job file; ``argv`` None: ``sys.argv[1:]``).

        A bad argument is a usage error (argparse: a message on stderr, exit 2).
        """
        parser = _parser()
        args = parser.parse_args(argv)
        ids = {}
        for value in args.consumer_id:
            topic, _, cid = value.rpartition("=")
            if not topic or not cid.isdigit():
                parser.error(f"--consumer-id takes TOPIC=ID, got {value!r}")
            ids[topic] = int(cid)
        logical = None
        if args.logical_date is not None:
            try:
                logical = logical_date_of(args.logical_date)
            except InvalidSettingError as exc:
                parser.error(f"--logical-date: {exc}")
        remote = args.remote
        if args.remote_env:
            remote = os.environ.get(ENGINE_URL_ENV) or parser.error(f"--remote-env: ${ENGINE_URL_ENV} is not set")
        return cls(job=job, pipeline=args.pipeline, stage=args.stage, run_id=args.run_id, source=args.source,
                   staging=args.staging, consumer_ids=ids, remote=remote, py_files=args.py_files,
                   dry_run=args.dry_run, logical_date=logical)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Run one stage of a minikafka pipeline (under spark-submit).")
    parser.add_argument("--pipeline", required=True)
    parser.add_argument("--stage", required=True)
    parser.add_argument("--run-id")
    parser.add_argument("--source", help="The ledger, instead of the pipeline file's 'source ='.")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--staging", help="staging URI every node sees (see minikafka.spark.staging)")
    parser.add_argument("--remote", help="run on the warm engine at sc://HOST:PORT instead of this process's own JVM")
    parser.add_argument("--remote-env", action="store_true",
                        help="as --remote, with the URL read from $MINIKAFKA_ENGINE_URL (a token stays off the "
                             "command line)")
    parser.add_argument("--py-files", help="a zip of the job's code for the engine's Python workers (with --remote)")
    parser.add_argument("--logical-date", metavar="YYYY-MM-DD",
                        help="the run's logical date, the transform's ctx.logical_date (default: today in UTC)")
    parser.add_argument("--consumer-id", action="append", default=[], metavar="TOPIC=ID",
                        help="the stage's consumer id on an input, registered by the runner that started this job "
                             "(which created and checked every topic): the job registers nothing and opens only "
                             "the stage's topics")
    return parser

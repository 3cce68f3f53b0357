"""The entry point a stage's job file calls under spark-submit.

A job file is small::

    from minikafka.job import main

    def transform(df):
        return df.where(...)

    if __name__ == "__main__":
        raise SystemExit(main())

``main`` reads ``--pipeline FILE --stage NAME [--run-id ID] [--source FILE] [--staging URI] [--dry-run]
[--remote sc://HOST:PORT [--py-files ZIP]] [--consumer-id TOPIC=ID ...]``, builds the SparkSession
spark-submit started (or, with ``--remote``, a client session of that warm engine, shipping ``ZIP``
so its Python workers import the job and its models), runs the stage with the ledger, prints the
run record as one JSON line, and exits 0 (succeeded/partial) or 1 (failed). The same file runs on
both engines. ``--consumer-id``: the runner that starts the job registered the stage's consumer
and checked every topic, so the job does neither and opens only the stage's own topics.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
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
    parser.add_argument("--consumer-id", action="append", default=[], metavar="TOPIC=ID",
                        help="the stage's consumer id on an input, registered by the runner that started this job "
                             "(which created and checked every topic): the job registers nothing and opens only "
                             "the stage's topics")
    args = parser.parse_args(argv)
    given = _consumer_ids(parser, args.consumer_id)

    import os

    if args.remote_env:
        from .spark.engine import ENGINE_URL_ENV

        args.remote = os.environ.get(ENGINE_URL_ENV) or parser.error(f"--remote-env: ${ENGINE_URL_ENV} is not set")

    from .util.procs import die_with_parent

    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit: die with its JVM, never run on as an orphan
        parent = os.getppid()
        if parent == 1:
            return 1
        die_with_parent(parent)

    from .errors import MinikafkaError
    from .pipelines.definition import load_pipeline
    from .pipelines.runner import build_stage, open_source, require_ledger
    from .spark.session import build_session
    from .spark.stages.stage import run_stage

    spark = None
    try:
        defn = load_pipeline(args.pipeline, suites=False)  # only this stage's suites, below
        if args.source:
            from pathlib import Path

            defn.source = Path(args.source).resolve()
        sd = defn.stage(args.stage)
        require_ledger(defn)  # before the JVM starts: a missing ledger is an error, never a new one
        sd.load_suites()
        if args.remote:
            from .spark.engine import connect

            spark = connect(args.remote, conf={**defn.spark, **sd.spark})
            if args.py_files:
                spark.addArtifacts(args.py_files, pyfile=True)
        else:
            spark = build_session(f"minikafka:{defn.name}:{sd.name}", conf={**defn.spark, **sd.spark})
        registered: dict[tuple[str, str], int] = {}  # the stage's consumer, registered once with every other
        with open_source(defn, create=False, register=not (args.dry_run or given),  # a dry run registers nothing
                         registered=registered, topics=[*sd.inputs, *sd.outputs] if given else None) as source:
            ids = given or {name: registered[(sd.name, name)] for name in sd.inputs if (sd.name, name) in registered}
            if sd.window_rows:  # window = { rows = N }: the backlog in chunks, one commit each
                from .spark.stages.chunks import combine, run_stage_in_chunks

                row = combine(run_stage_in_chunks(spark, source, build_stage(defn, sd), sd.window_rows,
                                                  run_id=args.run_id, dry_run=args.dry_run, staging=args.staging))
            else:
                row = run_stage(spark, source, build_stage(defn, sd), run_id=args.run_id,
                                dry_run=args.dry_run, staging=args.staging, consumer_ids=ids).as_row()
        print(json.dumps(row), flush=True)
        code = 0
    except MinikafkaError as exc:
        print(f"minikafka: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        if args.remote and spark is not None:
            try:
                spark.stop()  # the engine drops this client's session, its cache and artifacts
            except Exception:  # noqa: BLE001 - the stage's own outcome stands
                pass
    if args.remote:
        # a client's work is done and committed: skip the interpreter's teardown of the gRPC
        # client and the modules (measured: 0.7 s of a 3 s stage)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _consumer_ids(parser: argparse.ArgumentParser, values: list[str]) -> dict[str, int]:
    """{topic: id} from ``--consumer-id TOPIC=ID`` arguments (a bad one is a usage error, exit 2)."""
    out = {}
    for value in values:
        topic, _, cid = value.rpartition("=")
        if not topic or not cid.isdigit():
            parser.error(f"--consumer-id takes TOPIC=ID, got {value!r}")
        out[topic] = int(cid)
    return out

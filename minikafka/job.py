"""The entry point a stage's job file calls under spark-submit.

A job file is small::

    from minikafka.job import main

    def transform(df):
        return df.where(...)

    if __name__ == "__main__":
        raise SystemExit(main())

``main`` reads the stage's ``StageCall`` (``pipelines.launch.call``: ``--pipeline FILE --stage NAME
[--run-id ID] [--source FILE] [--staging URI] [--dry-run] [--remote sc://HOST:PORT [--py-files ZIP]]
[--consumer-id TOPIC=ID ...] [--logical-date YYYY-MM-DD]``), builds the SparkSession
spark-submit started (or, with ``--remote``, a client session of that warm engine, shipping ``ZIP``
so its Python workers import the job and its models), runs the stage with the ledger, prints the
run record as one JSON line, and exits 0 (succeeded/partial) or 1 (failed). The same file runs on
both engines. ``--consumer-id``: the runner that starts the job registered the stage's consumer
and checked every topic, so the job does neither and opens only the stage's own topics.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str] | None = None) -> int:
    from .pipelines.launch.call import StageCall  # here: a job module imports this file, not the launch room

    call = StageCall.from_argv(argv)  # a bad argument: a usage error, exit 2

    import os

    from .util.procs import die_with_parent

    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit: die with its JVM, never run on as an orphan
        parent = os.getppid()
        if parent == 1:
            return 1
        die_with_parent(parent)

    from .errors import MinikafkaError
    from .pipelines.definition import load_pipeline
    from .pipelines.launch.inprocess import build_stage
    from .pipelines.opening import open_source, require_ledger, stage_ids
    from .spark.session import build_session
    from .spark.stages.stage import run_stage

    spark = None
    try:
        # only this stage's suites (below) and job (build_stage imports it): the others' are read, not imported
        defn = load_pipeline(call.pipeline, check_jobs="source", suites=False)
        if call.source:
            from pathlib import Path

            defn.source = Path(call.source).resolve()
        sd = defn.stage(call.stage)
        require_ledger(defn)  # before the JVM starts: a missing ledger is an error, never a new one
        sd.load_suites()
        if call.remote:
            from .spark.engine import connect

            spark = connect(call.remote, conf={**defn.spark, **sd.spark})
            if call.py_files:
                spark.addArtifacts(call.py_files, pyfile=True)
        else:
            spark = build_session(f"minikafka:{defn.name}:{sd.name}", conf={**defn.spark, **sd.spark})
        registered: dict[tuple[str, str], int] = {}  # the stage's consumer, registered once with every other
        with open_source(defn, create=False, register=not (call.dry_run or call.consumer_ids),  # a dry run registers nothing
                         registered=registered, topics=[*sd.reads, *sd.outputs] if call.consumer_ids else None) as source:
            ids = call.consumer_ids or stage_ids(registered, sd)
            if sd.window_rows:  # window = { rows = N }: the backlog in chunks, one commit each
                from .spark.stages.chunks import combine, run_stage_in_chunks

                row = combine(run_stage_in_chunks(spark, source, build_stage(defn, sd), sd.window_rows,
                                                  run_id=call.run_id, dry_run=call.dry_run, staging=call.staging,
                                                  pipeline=defn.name, logical_date=call.logical_date))
            else:
                row = run_stage(spark, source, build_stage(defn, sd), run_id=call.run_id,
                                dry_run=call.dry_run, staging=call.staging, consumer_ids=ids, pipeline=defn.name,
                                logical_date=call.logical_date).as_row()
        print(json.dumps(row), flush=True)
        code = 0
    except MinikafkaError as exc:
        print(f"minikafka: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        if call.remote and spark is not None:
            try:
                spark.stop()  # the engine drops this client's session, its cache and artifacts
            except Exception:  # noqa: BLE001 - the stage's own outcome stands
                pass
    if call.remote:
        # a client's work is done and committed: skip the interpreter's teardown of the gRPC
        # client and the modules (measured: 0.7 s of a 3 s stage)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code

"""The process of an engine a run starts: ``python -m minikafka.pipelines.launch.engine_main``.

``ensure_engine`` starts it in the background (``minikafka serve`` is the same engine in the
foreground, for a person): it loads the pipeline, then ``engine.serve`` runs until SIGTERM or
its idle timeout. Its output goes to the engine's log; an error is one ``Error:`` line there
(exit 1), which ``ensure_engine`` reports.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a pipeline's warm engine (started by 'minikafka run').")
    parser.add_argument("--pipeline", required=True)
    parser.add_argument("--source")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--idle-timeout", type=float)
    parser.add_argument("--master")
    parser.add_argument("--no-warm-up", action="store_true")
    args = parser.parse_args(argv)

    from ...errors import MinikafkaError
    from ..definition import load_pipeline
    from .engine import serve

    try:
        defn = load_pipeline(args.pipeline, suites=False)
        if args.source:
            defn.source = Path(args.source).resolve()
        serve(defn, master=args.master, port=args.port, idle_timeout=args.idle_timeout or None,
              echo=lambda line: print(line, flush=True), warm_up=not args.no_warm_up)
    except MinikafkaError as exc:
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

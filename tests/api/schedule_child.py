"""A process ticking the scheduler for the schedule tests: ticks until told to stop, prints what it fired."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from minikafka import Source


class Keyed(BaseModel):
    """A job model whose topic the fault tests key on ``kind`` (dedup)."""

    kind: str


def main(path: str, stop_file: str) -> None:
    fired = []
    with Source(path) as source:
        sched = source.scheduler(lease=0.001)  # a lease that lapses at once: both processes lead in turns
        while not Path(stop_file).exists():
            fired += [(f.schedule, f.due.isoformat(), f.job_id) for f in sched.tick()]
            time.sleep(0.005)
    print(json.dumps(fired))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

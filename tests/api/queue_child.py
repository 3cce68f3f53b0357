"""A worker process for the queue tests: claim one job of queue ``tasks`` and ack it with a result."""

from __future__ import annotations

import sys

from pydantic import BaseModel

from minikafka import Source


class Task(BaseModel):
    n: int


def main(path: str) -> None:
    with Source(path) as source:
        q = source.queue("tasks", Task)
        for job in q.claim("child", idle_poll=0.5):
            job.ack({"square": job.data.n ** 2, "worker": "child"})
            return


if __name__ == "__main__":
    main(sys.argv[1])

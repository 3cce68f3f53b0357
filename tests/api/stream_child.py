"""A streaming consumer run as its own process by the crash tests (killed with SIGKILL)."""

from __future__ import annotations

import os
import sys
import time

from pydantic import BaseModel

from minikafka import Source


class WindowSum(BaseModel):
    window: int
    first: int
    last: int
    total: int


def main(path: str, log_path: str) -> None:
    freeze = os.environ.get("FREEZE_WINDOW")

    def summed(window):
        with open(log_path, "a") as log:
            log.write(f"{window.id} {','.join(str(r.id) for r in window.records)}\n")
        if freeze and int(freeze) == window.id:
            print(f"FROZEN window {window.id}", file=sys.stderr, flush=True)
            time.sleep(3600)
        return WindowSum(window=window.id, first=window.first_offset, last=window.last_offset,
                         total=sum(d["i"] for d in window.data))

    with Source(path) as source:
        sums = source.topic("sums", WindowSum, dedup=None)
        source.streaming("events", summed, size=2, sink=sums, until_idle=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

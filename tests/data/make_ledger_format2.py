"""Writes tests/data/ledger_format2.sqlite: a ledger of format 2 (positions plus a ``_status`` column).

Kept for the record: it ran against minikafka at commit 59fcd62 (format 2), before the
format that made positions and acks the only state. It no longer runs on the current
code (``_status`` is gone); the upgrade test holds the state it printed.

Topics:
- ``videos`` (1 partition, 10 rows): stage consumers ``enrich`` (a stage commit up to 6)
  and ``archive`` (a stage commit up to 4, then a per-row ack of 8, out of order); row 10
  set handled for every consumer; rows 1-4 read ``_status = 'new'`` although every consumer
  is past them.
- ``orders`` (3 partitions, 9 rows): group ``g`` committed offset 4 in partition 0 and,
  in partition 1 (rows 1, 4, 7), acked row 7 out of order (record.ack()).
- ``history`` (no consumers): 3 rows appended as handled, 2 new rows of which one was
  acked (minikafka's set_handled).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa

from minikafka import Source
from minikafka.ledger.consuming import RunResult
from minikafka.ledger.transactions import InputState, StagedOutput, commit_stage
from tests.api.modes.test_groups import Order
from tests.conftest import Video


def stage_commit(src: Source, consumer: str, upto: int, out, n_out: int) -> None:
    pending = src.topic("videos", Video, dedup=("url",)).count("new", consumer=consumer)
    run = RunResult(f"run-{consumer}", "stage", stage=consumer, consumer=consumer, inputs=["videos"],
                    outputs=[out.name])
    batch = pa.record_batch({"creator": ["s"] * n_out, "url": [f"{consumer}{i}" for i in range(n_out)],
                             "length_seconds": list(range(n_out))})
    upto_pending = min(pending, upto)
    commit_stage(src._ledger, run, consumer=consumer, inputs=[InputState("videos", upto, upto_pending)],
                 outputs=[StagedOutput(out.layout, [batch])])


def main(path: str) -> dict:
    Path(path).unlink(missing_ok=True)
    with Source(path) as src:
        videos = src.topic("videos", Video, dedup=("url",))
        out = src.topic("videos.out", Video, dedup=("url",))
        videos.extend([{"creator": "c", "url": f"u{i}", "length_seconds": i} for i in range(1, 11)])
        src.register_consumers([("videos", "enrich"), ("videos", "archive")])
        stage_commit(src, "enrich", 6, out, 2)
        stage_commit(src, "archive", 4, out, 1)
        videos.set_handled(8, consumer="archive")
        videos.set_handled(10)

        orders = src.topic("orders", Order, dedup=None, partitions=3)
        for i in range(1, 10):
            orders.append({"user": f"u{i}", "n": i})
        g = src.group("g")
        g.commit(orders, 0, 4)
        [rec] = [r for r in g.fetch(orders, 1, 10) if r.id == 7]
        rec.ack()

        history = src.topic("history", Order, dedup=None)
        history.extend([{"user": "h", "n": i} for i in range(3)], status="handled")
        history.extend([{"user": "n", "n": i} for i in range(2)])
        history.set_handled(5)

        state = {}
        for topic in (videos, orders, history, out):
            state[topic.name] = {
                "status": {r.id: r.status for r in topic.iter_new(records=True)}
                | {r.id: r.status for r in topic.iter_handled(records=True)},
                "consumers": {c: [r.id for r in topic.iter_new(records=True, consumer=c)] for c in topic.consumers()},
            }
    return state


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).with_name("ledger_format2.sqlite"))
    print(json.dumps(main(target), indent=1, sort_keys=True))

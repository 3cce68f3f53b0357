"""Writes tests/data/ledger_format4.sqlite: a ledger of format 4 (every topic table has a
``"<topic>__partition"`` index, one-partition topics included).

Kept for the record: it ran against minikafka at commit cd710be (format 4). Run from the
project root: ``python tests/data/make_ledger_format4.py``.

Topics:
- ``videos`` (1 partition, 5 rows): group ``a`` committed up to row 2 and acked row 4 out
  of order.
- ``orders`` (3 partitions, 6 rows, keyed by ``customer``): group ``g`` committed its first row
  in the first partition holding one.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel

from minikafka import Source

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.conftest import Video  # noqa: E402


class Order(BaseModel):
    customer: str
    amount: int


def main() -> None:
    path = Path(__file__).with_name("ledger_format4.sqlite")
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    with Source(str(path)) as src:
        videos = src.topic("videos", Video, dedup=("url",))
        for i in range(1, 6):
            videos.append(Video(creator="c", url=f"https://v/{i}", length_seconds=i))
        group = src.group("a")
        group.commit("videos", 0, 2)
        (fourth,) = [r for r in group.fetch("videos", 0, max_messages=10) if r.id == 4]
        fourth.ack()
        orders = src.topic("orders", Order, dedup=None, partitions=3, key=("customer",))
        for i in range(6):
            orders.append(Order(customer=f"c{i % 3}", amount=i))
        g = src.group("g")
        first = next(got[0] for p in range(3) if (got := g.fetch("orders", p, max_messages=1)))
        g.commit("orders", first.partition, first.offset)
    conn = __import__("sqlite3").connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

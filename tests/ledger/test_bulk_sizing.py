"""Bulk writes sized by the key index (ledger/topics/bulk.py): transactions and the page cache grow
with the topic's rows, read from row marks, and the connection's cache comes back after."""

from __future__ import annotations

from pydantic import BaseModel

from minikafka import Source
from minikafka.ledger.topics import bulk
from minikafka.ledger.transactions.connection import CACHE_KIB


class Item(BaseModel):
    url: str


def test_transactions_and_the_page_cache_grow_with_the_key_index_and_the_cache_comes_back(monkeypatch):
    monkeypatch.setattr(bulk, "ENTRY_BYTES", 4096 * 256)  # each row: 256 leaves of the key index
    with Source(":memory:") as src:
        t = src.topic("t", Item, dedup=("url",))
        plain = src.topic("plain", Item, dedup=None)
        conn = src.ledger.conn
        assert bulk.transaction_rows(conn, "t", 50) == 50  # empty: the caller's batch
        t.extend([{"url": f"u{i}"} for i in range(40)])
        plain.extend([{"url": f"u{i}"} for i in range(40)])
        assert bulk.transaction_rows(conn, "t", 50) == 40 * 256 * bulk.LEAF_ROWS
        # a load that says how many rows it adds: sized by the index those rows grow it to
        assert bulk.transaction_rows(conn, "t", 50, adding=40) == 80 * 256 * bulk.LEAF_ROWS
        assert bulk.transaction_rows(src.ledger.conn, "plain", 50, adding=10**6) == 50
        assert bulk.transaction_rows(conn, "plain", 50) == 50  # no dedup: no key index
        t.extend([{"url": f"v{i}"} for i in range(4000)])
        assert bulk.transaction_rows(conn, "t", 50) == bulk.MAX_ROWS
        with bulk.page_cache(conn, ["t", "plain"]) as kib:
            assert kib > CACHE_KIB
            assert conn.execute("PRAGMA cache_size").fetchone()[0] == -kib
        assert conn.execute("PRAGMA cache_size").fetchone()[0] == -CACHE_KIB
        with bulk.page_cache(conn, "plain") as kib:
            assert kib == CACHE_KIB


def test_sizing_a_bulk_write_reads_one_id_and_counts_no_rows():
    with Source(":memory:") as src:
        t = src.topic("t", Item, dedup=("url",))
        t.extend([{"url": f"u{i}"} for i in range(5000)])
        conn = src.ledger.conn
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            rows = bulk.transaction_rows(conn, "t", 50)
            with bulk.page_cache(conn, "t"):
                pass
        finally:
            conn.set_trace_callback(None)
        assert rows == max(50, min(bulk.MAX_ROWS, 5000 * bulk.ENTRY_BYTES // bulk.PAGE_BYTES * bulk.LEAF_ROWS))
        assert not [s for s in statements if "count(" in s.lower()]  # a count reads rows, and grows with them

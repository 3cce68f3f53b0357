"""Counts from positions and row marks (ledger/topics/counts.py) equal a scan of the status views,
whatever happened to the topic: appends, acks, replays, dropped consumers, retention,
quarantine, a kill -9 inside a transaction, writers in several processes; and reading
them costs the same at 10x the rows.

Row marks are spaced every few rows here (``SPACING`` patched) so every path crosses
many of them.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.ledger.consuming import consumer_info, retention
from minikafka.ledger.topics import counts
from minikafka.util.clock import utc_now

ROOT = Path(__file__).resolve().parents[2]


class Item(BaseModel):
    k: str
    v: int


@pytest.fixture(autouse=True)
def close_marks(monkeypatch):
    monkeypatch.setattr(counts, "SPACING", 5)


def scanned(src: Source, topic: str) -> dict:
    """What the topic's status views say, counted row by row (plain SQL, no counts.py)."""
    conn = src.ledger.conn
    q = '"' + topic + '"'
    out = {"total": conn.execute(f"SELECT count(*) FROM {q}").fetchone()[0],
           "new": conn.execute(f'SELECT count(*) FROM "{topic}:status" WHERE "_status" = \'new\'').fetchone()[0]}
    for name, partition, n in conn.execute(
            f'SELECT consumer, "_partition", count(*) FROM "{topic}:consumers" WHERE "_status" = \'new\' '
            "GROUP BY 1, 2"):
        out.setdefault(name, {})[partition] = n
    return out


def counted(src: Source, topic: str) -> dict:
    """The same figures as the library reads them (no scan)."""
    t = src.topic(topic, Item, dedup=("k",), partitions=src.layout(topic).partitions,
                  key=src.layout(topic).key or None)
    out = {"total": t.count(), "new": t.count("new")}
    assert t.count("handled") == out["total"] - out["new"]
    for info in consumer_info(src.ledger.conn, topic):
        lag = {p: n for p, n in src.group(info.name).lag(topic).items() if n}
        if lag:
            out[info.name] = lag
        assert info.lag == sum(lag.values())
        assert t.count("new", consumer=info.name) == info.lag
        assert t.count("handled", consumer=info.name) == out["total"] - info.lag
    return out


def make(src: Source, partitions: int = 1):
    return src.topic("t", Item, dedup=("k",), partitions=partitions, key=("k",) if partitions > 1 else None)


@pytest.mark.parametrize("partitions", [1, 3])
def test_counts_equal_a_scan_through_random_appends_acks_replays_and_dropped_consumers(partitions):
    rng = random.Random(partitions)
    with Source(":memory:") as src:
        t = make(src, partitions)
        made = 0
        for step in range(150):
            roll = rng.random()
            top = t.high_watermark()
            if roll < 0.25 or top == 0:
                n = rng.randint(1, 12)
                t.extend([{"k": f"k{made + i}", "v": i} for i in range(n)],
                         status="handled" if rng.random() < 0.1 else "new")
                made += n
            elif roll < 0.35:
                t.append({"k": f"k{made}", "v": 0})
                t.append({"k": f"k{made}", "v": 0}, on_duplicate="ignore")  # a duplicate stores nothing
                made += 1
            elif roll < 0.45 and len(t.consumers()) < 3:
                t.consumer(f"c{step}", start=rng.choice(["earliest", "latest"]))
            elif roll < 0.7:
                consumer = rng.choice([None, *t.consumers()])
                t.set_handled(rng.randint(1, top), consumer=consumer)
            elif roll < 0.8 and t.consumers():
                group = src.group(rng.choice(t.consumers()))
                p = rng.randrange(partitions)
                group.commit("t", p, rng.randint(1, top))
            elif roll < 0.9 and t.consumers():
                lo = rng.randint(1, top)
                t.replay(rng.choice(t.consumers()), from_id=lo, to_id=rng.randint(lo, top))
            elif t.consumers() and rng.random() < 0.3:
                t.drop_consumer(rng.choice(t.consumers()))
            assert counted(src, "t") == scanned(src, "t"), f"step {step}"
        marks = src.ledger.conn.execute("SELECT count(*) FROM _minikafka_row_counts").fetchone()[0]
        assert marks >= made // counts.SPACING // 2  # the counts did go through marks


@pytest.mark.parametrize("partitions", [1, 3])
def test_retention_deleting_handled_rows_keeps_counts_exact(partitions):
    with Source(":memory:") as src:
        t = make(src, partitions)
        t.extend([{"k": f"k{i}", "v": i} for i in range(60)])
        t.consumer("a")
        group = src.group("a")
        for p in range(partitions):
            group.commit("t", p, 30)
        for row_id in (35, 41, 50, 59):
            t.set_handled(row_id)  # handled for every consumer, above the positions
        with src.ledger.atomic() as conn:
            deleted = retention.delete_expired_in_current_transaction(conn, src.layout("t"), "9999-12-31")
        assert deleted > 0
        assert counted(src, "t") == scanned(src, "t")
        t.extend([{"k": f"x{i}", "v": i} for i in range(23)])
        t.set_handled(70, consumer="a")
        assert counted(src, "t") == scanned(src, "t")


def test_rows_a_stage_quarantines_and_the_rows_it_writes_count_exactly():
    pa = pytest.importorskip("pyarrow")
    from minikafka.ledger.consuming import RunResult, new_run_id
    from minikafka.ledger.transactions import InputState, StagedOutput, commit_stage

    with Source(":memory:") as src:
        t = make(src)
        out = src.topic("out", Item, dedup=("k",))
        t.extend([{"k": f"k{i}", "v": i} for i in range(40)])
        out.extend([{"k": "o1", "v": 1}])
        conn = src.ledger.conn
        with src.ledger.atomic():
            from minikafka.ledger.topics import acks

            cid = acks.register_consumer_in_current_transaction(conn, "t", "stage", utc_now())
        batch = pa.RecordBatch.from_pydict({"k": [f"o{i}" for i in range(30)], "v": list(range(30))})
        run = RunResult(new_run_id("s"), "stage", stage="s", consumer="stage", inputs=["t"], outputs=["out"])
        commit_stage(src.ledger, run, consumer="stage",
                     inputs=[InputState("t", 40, 40, failures={7: "bad", 9: "bad"}, consumer_id=cid)],
                     outputs=[StagedOutput(src.layout("out"), [batch])], max_attempts=1)
        assert run.rows_quarantined == 2 and run.rows_out == 29
        assert counted(src, "t") == scanned(src, "t") == {"total": 40, "new": 0}
        assert counted(src, "out") == scanned(src, "out") == {"total": 30, "new": 30}


CHILD = textwrap.dedent("""
    import sys, time
    from pydantic import BaseModel
    from minikafka import Source
    from minikafka.ledger.topics import counts

    counts.SPACING = 5

    class Item(BaseModel):
        k: str
        v: int

    path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Source(path) as src:
        t = src.topic("t", Item, dedup=("k",))
        if who == "stuck":
            with src.transaction():
                t.extend([{"k": f"stuck{i}", "v": i} for i in range(n)])
                print("INSIDE", flush=True)
                time.sleep(600)
        for i in range(0, n, 7):
            t.extend([{"k": f"{who}{j}", "v": j} for j in range(i, min(i + 7, n))])
            t.append({"k": f"{who}{i}", "v": -1}, on_duplicate="ignore")
    """)


def _child(path: str, who: str, n: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, path, who, str(n)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_writer_killed_inside_its_transaction_leaves_counts_exact(db_path):
    with Source(db_path) as src:
        make(src).extend([{"k": f"k{i}", "v": i} for i in range(33)])
    child = _child(db_path, "stuck", 500)
    try:
        assert child.stdout.readline().strip() == "INSIDE"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with Source(db_path) as src:
        t = make(src)
        assert counted(src, "t") == scanned(src, "t") == {"total": 33, "new": 33}
        t.extend([{"k": f"after{i}", "v": i} for i in range(12)])
        assert counted(src, "t") == scanned(src, "t") == {"total": 45, "new": 45}


def test_writers_in_several_processes_leave_counts_exact(db_path):
    with Source(db_path) as src:
        make(src).consumer("a")
    children = [_child(db_path, who, 120) for who in ("p", "q", "r")]
    for child in children:
        assert child.wait(timeout=120) == 0
    with Source(db_path) as src:
        make(src)
        src.group("a").commit("t", 0, 100)
        assert counted(src, "t") == scanned(src, "t") == {"total": 360, "new": 260, "a": {0: 260}}


def _steps(src: Source, fn) -> int:
    """SQLite VM steps (in units of 100) that ``fn`` costs on the Source's connection."""
    conn = src.ledger.conn
    seen = [0]

    def tick():
        seen[0] += 1
        return 0

    conn.set_progress_handler(tick, 100)
    try:
        fn()
    finally:
        conn.set_progress_handler(None, 0)
    return seen[0]


def test_reading_the_counts_costs_the_same_at_ten_times_the_rows(monkeypatch):
    monkeypatch.setattr(counts, "SPACING", 256)
    costs = []
    for rows in (5_000, 50_000):
        with Source(":memory:") as src:
            t = make(src)
            for lo in range(0, rows, 5_000):
                t.extend([{"k": f"k{i}", "v": i} for i in range(lo, lo + 5_000)])
            t.consumer("a")
            src.group("a").commit("t", 0, rows // 2)
            t.set_handled(rows // 2 + 10, consumer="a")
            costs.append(_steps(src, lambda src=src: (counts.topic_counts(src.ledger.conn, "t"),
                                                       src.group("a").lag("t"))))
            assert counted(src, "t") == scanned(src, "t")
    assert costs[1] < 2 * costs[0] + 20, costs


def test_upgrading_an_older_ledger_marks_its_rows_and_counts_stay_what_a_scan_says(tmp_path, monkeypatch):
    import shutil
    import sqlite3

    monkeypatch.setattr(counts, "SPACING", 2)
    path = tmp_path / "old.sqlite"
    shutil.copy(ROOT / "tests" / "data" / "ledger_format4.sqlite", path)
    with Source(str(path)) as src:
        assert src.ledger.upgraded_from == 4
        conn = src.ledger.conn
        marks = conn.execute("SELECT topic, partition, upto, rows FROM _minikafka_row_counts ORDER BY 1, 2, 3").fetchall()
        assert ("videos", 0, 2, 2) in marks and ("videos", 0, 5, 5) in marks
        assert {t for t, *_ in marks} == {"videos", "orders"}
        (cid,) = conn.execute("SELECT id FROM _minikafka_consumers WHERE topic = 'videos' AND name = 'a'").fetchone()
        assert counts.pending_counts(conn, "videos", cid) == {0: 2}  # rows 3 and 5
        for topic in ("videos", "orders"):
            tally = counts.topic_counts(conn, topic)
            total = conn.execute(f'SELECT count(*) FROM "{topic}"').fetchone()[0]
            new = conn.execute(f'SELECT count(*) FROM "{topic}:status" WHERE "_status" = \'new\'').fetchone()[0]
            assert (tally.total, tally.new) == (total, new)
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    check.close()


@pytest.mark.parametrize("partitions", [1, 3])
def test_rows_pending_up_to_an_id_equal_a_scan_of_that_range(partitions):
    from minikafka.ledger.topics import acks

    rng = random.Random(7)
    with Source(":memory:") as src:
        t = make(src, partitions)
        t.extend([{"k": f"k{i}", "v": i} for i in range(80)])
        t.consumer("a")
        src.group("a").commit("t", 0, 20)
        for row_id in rng.sample(range(1, 81), 15):
            t.set_handled(row_id, consumer=rng.choice(["a", None]))
        conn = src.ledger.conn
        cid = acks.find_consumer(conn, "t", "a")
        for upto in (0, 5, 21, 33, 60, 80, 200):
            for parts in (None, [partitions - 1]):
                where = f'"_id" <= {upto}' + ("" if parts is None else f' AND "_partition" = {parts[0]}')
                expected = conn.execute(f'SELECT count(*) FROM "t:consumers" WHERE consumer = \'a\' AND '
                                        f"\"_status\" = 'new' AND {where}").fetchone()[0]
                assert acks.count_pending(conn, "t", cid, upto, parts) == expected, (upto, parts)

"""The watcher: commits by any connection wake every waiter; rollbacks and timeouts do not."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.ledger.transactions import Watcher
from minikafka.ledger.transactions.watcher import wait_until


class Ping(BaseModel):
    n: int


def _commit(path: str, sql: str = "INSERT INTO t VALUES (1)", rollback: bool = False) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(sql)
    conn.execute("ROLLBACK" if rollback else "COMMIT")
    conn.close()


@pytest.fixture
def table(db_path):
    with Source(db_path):
        pass
    _commit(db_path, "CREATE TABLE t (x INTEGER)")
    return db_path


@pytest.mark.parametrize("backend", ["inotify", "poll"])
def test_a_commit_by_another_connection_wakes_every_waiter(table, backend):
    watcher = Watcher(table, backend=backend)
    try:
        mark = watcher.mark()
        woke = []

        def waiter():
            woke.append(watcher.wait(mark, timeout=5) != mark)

        threads = [threading.Thread(target=waiter) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.02)
        _commit(table)
        for t in threads:
            t.join()
        assert woke == [True, True, True]
    finally:
        watcher.close()


@pytest.mark.parametrize("backend", ["inotify", "poll"])
def test_a_rolled_back_transaction_wakes_nobody(table, backend):
    watcher = Watcher(table, backend=backend)
    try:
        mark = watcher.mark()
        _commit(table, rollback=True)
        assert watcher.wait(mark, timeout=0.3) == mark
    finally:
        watcher.close()


def test_a_commit_between_mark_and_wait_is_not_missed(table):
    watcher = Watcher(table)
    try:
        mark = watcher.mark()
        _commit(table)  # lands after the mark, before the wait
        assert watcher.wait(mark, timeout=5) != mark
    finally:
        watcher.close()


def test_wait_until_rechecks_state_after_every_wake_and_times_out(table):
    watcher = Watcher(table)
    try:
        calls = []
        assert wait_until(watcher, lambda: calls.append(1), timeout=0.05) is None
        assert calls
        assert wait_until(watcher, lambda: "ready", timeout=0) == "ready"
    finally:
        watcher.close()


def test_close_releases_waiters(table):
    watcher = Watcher(table)
    mark = watcher.mark()
    done = []
    t = threading.Thread(target=lambda: done.append(watcher.wait(mark)))
    t.start()
    time.sleep(0.02)
    watcher.close()
    t.join(2)
    assert done == [mark]


def test_topic_wait_returns_when_another_process_appends(db_path):
    with Source(db_path) as source:
        topic = source.topic("pings", Ping, dedup=None)
        topic.append({"n": 0})
        code = (
            "import sys, time; sys.path.insert(0, '.');"
            "from pydantic import BaseModel\n"
            "from minikafka import Source\n"
            "class Ping(BaseModel):\n    n: int\n"
            f"time.sleep(0.1)\nSource({db_path!r}).topic('pings', Ping, dedup=None).append({{'n': 1}})\n"
        )
        child = subprocess.Popen([sys.executable, "-c", code])
        try:
            assert topic.wait(timeout=10) is True
        finally:
            child.wait(10)
        assert topic.high_watermark() == 2
        assert topic.wait(timeout=0.05) is False


def test_topic_wait_ignores_rows_that_existed_before_it_started(file_source):
    topic = file_source.topic("pings", Ping, dedup=None)
    topic.append({"n": 0})
    assert topic.wait(timeout=0.05) is False


def test_memory_source_waits_only_for_the_timeout(source):
    topic = source.topic("pings", Ping, dedup=None)
    assert topic.wait(timeout=0.05) is False


def test_closing_the_source_stops_its_watcher(db_path):
    source = Source(db_path)
    watcher = source.watcher
    watcher.mark()
    thread = watcher._thread
    source.close()
    assert not thread.is_alive()

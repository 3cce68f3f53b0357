"""The watcher under misuse: the ledger file replaced under a listener, a bogus
MINIKAFKA_WATCHER, NaN and infinite timeouts."""

from __future__ import annotations

import math
import os
import threading
import time

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.errors import InvalidDurationError, InvalidSettingError, LedgerReplacedError
from minikafka.ledger.transactions import Watcher
from minikafka.ledger.transactions.watcher import wait_until


class Ping(BaseModel):
    n: int


@pytest.mark.parametrize("backend", ["inotify", "poll"])
def test_a_listener_raises_within_seconds_when_the_ledger_file_is_replaced(db_path, tmp_path, monkeypatch, backend):
    monkeypatch.setenv("MINIKAFKA_WATCHER", backend)
    other = str(tmp_path / "other.sqlite")
    with Source(other):
        pass
    with Source(db_path):
        pass
    listening = threading.Event()
    outcome: list = []

    def listen():  # a Source belongs to its thread: the listener runs entirely here
        with Source(db_path) as source:
            listener = source.listen("orders")
            listening.set()
            try:
                next(listener)
            except BaseException as exc:  # noqa: BLE001 (reported to the test thread)
                outcome.append(exc)
            try:
                source.topic("pings", Ping, dedup=None).wait(timeout=5)
            except BaseException as exc:  # noqa: BLE001
                outcome.append(exc)

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert listening.wait(10)
    time.sleep(0.1)
    os.replace(other, db_path)  # an atomic replace, as a restore from a backup does it
    replaced_at = time.monotonic()
    while not outcome and time.monotonic() - replaced_at < 10:
        time.sleep(0.01)
    noticed = time.monotonic() - replaced_at
    thread.join(10)
    assert outcome, "the listener never noticed that its ledger file was replaced"
    exc = outcome[0]
    assert isinstance(exc, LedgerReplacedError) and db_path in str(exc) and "open a new Source" in str(exc)
    assert noticed < 3
    assert isinstance(outcome[1], LedgerReplacedError)  # every later wait says so at once


def test_a_deleted_ledger_file_is_reported_too(db_path):
    with Source(db_path):
        pass
    watcher = Watcher(db_path, backend="poll")
    try:
        mark = watcher.mark()
        os.remove(db_path)
        with pytest.raises(LedgerReplacedError, match="was removed"):
            watcher.wait(mark, timeout=5)
    finally:
        watcher.close()


def test_an_unknown_minikafka_watcher_value_is_a_clear_error_naming_the_allowed_values(file_source, monkeypatch):
    monkeypatch.setenv("MINIKAFKA_WATCHER", "bogus")
    with pytest.raises(InvalidSettingError, match=r"MINIKAFKA_WATCHER='bogus'.*'inotify' or 'poll'"):
        file_source.topic("pings", Ping, dedup=None).wait(timeout=0.01)
    with pytest.raises(InvalidSettingError, match="'inotify' or 'poll'"):
        Watcher(file_source.path, backend="epoll")
    monkeypatch.setenv("MINIKAFKA_WATCHER", " POLL ")
    assert Watcher(file_source.path).backend == "poll"


@pytest.mark.parametrize("timeout", [math.nan, math.inf])
def test_a_nan_or_infinite_timeout_is_refused_instead_of_blocking_forever(file_source, timeout):
    watcher = file_source.watcher
    with pytest.raises(InvalidDurationError, match="finite number"):
        watcher.wait(watcher.mark(), timeout)
    with pytest.raises(InvalidDurationError, match="finite number"):
        wait_until(watcher, lambda: False, timeout)
    with pytest.raises(InvalidDurationError, match="finite number"):
        next(file_source.listen("orders", timeout=timeout))

"""The console's layout in a real browser (Debian's headless Chromium): long unbroken values (a
URL, a hash, a payload without spaces) wrap inside the page's width instead of widening it."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.ledger.consuming import (
    Quarantined,
    RunResult,
    quarantine_in_current_transaction,
    write_run_in_current_transaction,
)

from .ledgers import small_ledger

UNBROKEN = "0123456789abcdef" * 300  # 4,800 characters without a place to break


class Blob(BaseModel):
    name: str
    digest: str
    note: str


@pytest.fixture
def long_values(tmp_path):
    (tmp_path / "data").mkdir()
    path = small_ledger(tmp_path / "data" / "long.sqlite")
    with Source(path) as source:
        source.topic("blobs", Blob, dedup=None).extend(
            [{"name": f"b{i}", "digest": UNBROKEN, "note": "https://example.com/" + UNBROKEN} for i in range(3)])
        run = RunResult("run-20260103T000000Z-unbroken", "stage", stage="hash", outputs=["blobs"])
        run.finish("failed", "digest mismatch: " + UNBROKEN)
        with source.ledger.atomic() as conn:
            write_run_in_current_transaction(conn, run)
            quarantine_in_current_transaction(conn, [Quarantined(
                "blobs", json.dumps({"digest": UNBROKEN}), "digest: " + UNBROKEN, "blobs.jsonl:1" + UNBROKEN,
                "2026-01-03T00:00:00.000000Z")])
    return path


def test_long_unbroken_values_wrap_inside_the_page_width(long_values, start_console, browser):
    console = start_console(long_values)
    browser.set_window_size(900, 900)
    try:
        wide = {}
        for page in ["/topics/blobs", "/runs/run-20260103T000000Z-unbroken", "/runs", "/quarantine",
                     "/quarantine/2", "/", "/topics/" + UNBROKEN[:120]]:
            browser.get(console.url + page)
            width, room = browser.execute_script(
                "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            if width > room:
                wide[page[:40]] = (width, room)
    finally:
        browser.set_window_size(1280, 900)
    assert not wide, wide

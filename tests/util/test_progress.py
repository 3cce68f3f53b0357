"""util.progress.heartbeat: a long step says it is still running."""

from __future__ import annotations

import threading

from minikafka.util.progress import heartbeat


def test_heartbeat_reports_while_the_block_runs_and_stops_after():
    lines: list[str] = []
    seen = threading.Event()

    def echo(line):
        lines.append(line)
        seen.set()

    with heartbeat(echo, "score", every=0.01):
        assert seen.wait(5)
    n = len(lines)
    assert lines[0].startswith("   score: still running (") and n >= 1
    seen.clear()
    assert not seen.wait(0.05) and len(lines) == n


def test_heartbeat_without_echo_prints_nothing():
    with heartbeat(None, "x", every=0.001):
        pass

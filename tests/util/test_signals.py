"""SIGTERM inside ``sigterm_interrupts``: raised once as Terminated (a KeyboardInterrupt), a
second SIGTERM during the clean-up ignored, the previous handler back afterwards."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import os, signal, sys
    from minikafka.util.signals import Terminated, sigterm_interrupts

    before = signal.getsignal(signal.SIGTERM)
    try:
        with sigterm_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            print("not reached")
    except Terminated:
        print("terminated")
    assert signal.getsignal(signal.SIGTERM) is before
    try:
        with sigterm_interrupts():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except KeyboardInterrupt:
                os.kill(os.getpid(), signal.SIGTERM)  # a second one while cleaning up: ignored
                print("clean-up finished")
                raise
    except KeyboardInterrupt as exc:
        print(type(exc).__name__)
    os.kill(os.getpid(), signal.SIGTERM)  # outside: the default again, the process ends
    print("not reached either")
""")


def test_sigterm_raises_terminated_once_and_the_default_comes_back_afterwards():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert proc.stdout.splitlines() == ["terminated", "clean-up finished", "Terminated"], proc.stderr
    assert proc.returncode == -15


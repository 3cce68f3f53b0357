"""A real Mosquitto broker on 127.0.0.1, on a free port, for the MQTT tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest

from tests.util.ports import unused_port

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


@pytest.fixture
def broker(tmp_path):
    """``mqtt://127.0.0.1:PORT`` of a Mosquitto started for the test (stopped after it)."""
    import os

    if not os.path.exists(MOSQUITTO):
        pytest.skip("mosquitto is not installed (scripts/setup.sh installs it)")
    port = unused_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"mosquitto did not start: {proc.stderr.read().decode()}") from None
            time.sleep(0.02)
    yield f"mqtt://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)

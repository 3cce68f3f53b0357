"""A TCP port on 127.0.0.1 that nothing listens on (bound, then released)."""

from __future__ import annotations

import socket


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

"""Serving the console: uvicorn on a socket we bind ourselves (so port 0 names the port it got)."""

from __future__ import annotations

import ipaddress
import signal
import socket
from collections.abc import Callable, Sequence

from ..errors import InvalidSettingError
from ..util.optional import require
from .app import LOOPBACK_HOSTS, create_app

GRACEFUL_S = 1  # seconds open event streams (pages left open) get to end on shutdown


def is_loopback(host: str) -> bool:
    """``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port).

    Raises:
        InvalidSettingError: the address cannot be bound (in use, not this machine's).
    """
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise InvalidSettingError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def served_hosts(host: str, *, allow_remote: bool = False, auth_token: str | None = None,
                 allowed_hosts: Sequence[str] = ()) -> list[str]:
    """The ``Host:`` header values the console answers (any other is a 400, against DNS rebinding).

    On loopback: the loopback names and ``host`` itself (``--host 127.0.0.2`` serves the URL it
    prints). Elsewhere: ``allowed_hosts`` (plus ``host`` and the loopback names), or any name when
    an auth token guards every request.

    Raises:
        InvalidSettingError: a non-loopback host without ``allow_remote``; or with it, neither an auth
            token nor allowed hosts (any web page could then read the ledger through DNS rebinding).
    """
    bare = host.strip("[]")
    own = [bare, f"[{bare}]"] if ":" in bare else [bare]
    named = [h.strip() for h in allowed_hosts if h.strip()]
    if is_loopback(host):
        return list(dict.fromkeys([*LOOPBACK_HOSTS, *own, *named]))
    if not allow_remote:
        raise InvalidSettingError(f"--host {host} is reachable from other machines: pass --allow-remote too "
                                  "(with --auth-token or --allowed-host)")
    if named:
        return list(dict.fromkeys([*named, *own, *LOOPBACK_HOSTS]))
    if not auth_token:
        raise InvalidSettingError(f"--host {host} --allow-remote without --auth-token would serve any web page "
                                  "that names this address (DNS rebinding): pass --auth-token, or --allowed-host "
                                  "with the names the console is reached by")
    return ["*"]


def serve(path: str, *, host: str = "127.0.0.1", port: int = 8787, pipelines=(), allow_actions: bool = False,
          allow_remote: bool = False, auth_token: str | None = None, allowed_hosts: Sequence[str] = (),
          on_ready: Callable[[str], None] | None = None) -> None:
    """Serve the console over the ledger at ``path`` until interrupted (Ctrl-C or SIGTERM).

    Args:
        host: the address to listen on; anything but loopback needs ``allow_remote``.
        pipelines: loaded pipeline files on this ledger (see ``create_app``).
        port: the TCP port (0: any free one).
        allowed_hosts: the ``Host:`` names served besides ``host`` (see ``served_hosts``).
        on_ready: called with the console's URL once it listens.

    Raises:
        InvalidSettingError: a non-loopback host without ``allow_remote`` (or with it, without a token or
            allowed hosts), an empty token, or an address that cannot be bound.
        MissingDependencyError: the ``ui`` extra is not installed.
    """
    uvicorn = require("uvicorn", "ui")
    hosts = served_hosts(host, allow_remote=allow_remote, auth_token=auth_token, allowed_hosts=allowed_hosts)
    app = create_app(path, pipelines=pipelines, allow_actions=allow_actions, auth_token=auth_token,
                     allowed_hosts=hosts)
    sock = bind(host, port)
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    url = f"http://{shown}:{sock.getsockname()[1]}/"
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=GRACEFUL_S,
                            lifespan="on")
    server = uvicorn.Server(config)
    if on_ready is not None:
        config_started = server.startup

        async def startup(sockets=None):
            await config_started(sockets=sockets)
            on_ready(url)

        server.startup = startup
    # uvicorn stops gracefully on SIGTERM, then raises the signal again for the handler it found:
    # ours makes that a return (the command then exits 0); Ctrl-C stays a KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()

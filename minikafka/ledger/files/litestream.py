"""A Litestream configuration for a ledger (``minikafka doctor --litestream``).

Litestream replicates the ledger continuously by reading its write-ahead log from its own
process. What makes the two work together (see docs/how-to/litestream.md):

- every minikafka connection waits on a lock (``busy_timeout`` 30 s) instead of failing
  while Litestream checkpoints;
- minikafka checkpoints only PASSIVE (``filecheck``): it never waits for Litestream's
  reader, never truncates or restarts the log under it;
- the ledger stays in WAL mode (Litestream needs it; minikafka sets it on every open).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_SYNC = "1s"


def default_replica(ledger: str | Path) -> str:
    """A file replica beside the ledger: ``file://<ledger dir>/<stem>-replica``."""
    path = Path(ledger).expanduser().resolve()
    return (path.parent / f"{path.stem}-replica").as_uri()


def replica_url(replica: str) -> str:
    """``replica`` as a URL: a plain path becomes ``file://`` (absolute)."""
    if "://" in replica:
        return replica
    return Path(replica).expanduser().resolve().as_uri()


def litestream_config(ledger: str | Path, replica: str | None = None, *, sync_interval: str = DEFAULT_SYNC) -> str:
    """The text of a ``litestream.yml`` replicating ``ledger`` to ``replica`` (a URL or a directory).

    Values are written as JSON strings, which YAML reads as the same strings whatever
    characters the paths hold.
    """
    path = Path(ledger).expanduser().resolve()
    url = replica_url(replica) if replica else default_replica(path)
    scheme = urlsplit(url).scheme or "file"
    return "\n".join([
        "# litestream.yml for a minikafka ledger (minikafka doctor --litestream)",
        "# run:      litestream replicate -config litestream.yml",
        f"# restore:  litestream restore -config litestream.yml -o restored.sqlite {json.dumps(str(path))}",
        f"# replica type: {scheme}",
        "dbs:",
        f"  - path: {json.dumps(str(path))}",
        "    replica:",
        f"      url: {json.dumps(url)}",
        f"      sync-interval: {json.dumps(sync_interval)}",
        "",
    ])

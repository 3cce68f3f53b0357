"""Test helpers over /proc: the live processes that carry an environment marker (a test's own
children, found whoever their parent is now), and the process tree under a pid."""

from __future__ import annotations

import os
from pathlib import Path


def marked_pids(name: str, value: str) -> list[int]:
    """Pids of live (not zombie) processes whose environment holds ``name=value``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"{name}={value}".encode() in environ.split(b"\0") and state != "Z":
            pids.append(int(entry))
    return pids


def children_by_parent() -> dict[int, list[int]]:
    """Every process's children, keyed by parent pid, as /proc shows them now."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree

"""Directories made for a file about to be created, and taken back when its creation fails."""

from __future__ import annotations

from pathlib import Path


def make_missing_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; the ones created, outermost first.

    Raises:
        OSError: one cannot be created (a read-only or full disk, a file in the way); the ones
            already created by this call are removed again first.
    """
    missing = []
    probe = directory
    while not probe.exists() and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    made: list[Path] = []
    try:
        for one in reversed(missing):
            one.mkdir()
            made.append(one)
    except OSError:
        remove_made_dirs(made)
        raise
    return made


def remove_made_dirs(made: list[Path]) -> None:
    """Remove the directories ``make_missing_dirs`` created (innermost first), where still empty."""
    for one in reversed(made):
        try:
            one.rmdir()
        except OSError:
            pass

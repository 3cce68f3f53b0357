"""Shared by the benchmark scripts: a figure that misses its target makes the script exit 1."""

from __future__ import annotations

import builtins
import sys


def exit_code(main) -> int:
    """Run ``main()``, watching what it prints: 1 if any line reports FAIL, else 0."""
    missed = []
    original = builtins.print

    def watching(*args, **kwargs):
        text = " ".join(str(a) for a in args)
        if text.rstrip().endswith("FAIL") and kwargs.get("file") in (None, sys.stdout):
            missed.append(text)
        original(*args, **kwargs)

    builtins.print = watching
    try:
        main()
    finally:
        builtins.print = original
    return 1 if missed else 0

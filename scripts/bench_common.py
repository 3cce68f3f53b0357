"""Shared by the benchmark scripts: a figure that misses its target makes the script exit 1."""

from __future__ import annotations

import atexit
import builtins
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def scratch_dir(prefix: str) -> Path:
    """A new temporary directory, removed when the script exits (the ledgers of a 1,000,000-row
    benchmark take a gigabyte or more)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


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


def timed_minikafka(root: Path, env: dict[str, str], *args, check: bool = True) -> float:
    """Run `minikafka ARGS` as a new process from the checkout ``root``; return its wall time in
    seconds (a failed command, when ``check``, stops the benchmark with its output)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "minikafka.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=root, env=env)
    seconds = time.perf_counter() - t0
    if check and proc.returncode != 0:
        raise SystemExit(f"minikafka {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return seconds

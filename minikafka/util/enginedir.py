"""Where this user's warm engines are recorded, readable without importing Spark.

``minikafka status`` shows the engine section on every overview; with no engine recorded it
says so from here, so a status that has nothing to say of an engine never imports pyspark.
"""

from __future__ import annotations

import os
from pathlib import Path

ENGINE_DIR_ENV = "MINIKAFKA_ENGINE_DIR"


def engines_dir() -> Path:
    """This user's engine directory (``$MINIKAFKA_ENGINE_DIR``, else the cache's ``minikafka/engines``)."""
    given = os.environ.get(ENGINE_DIR_ENV)
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minikafka" / "engines"


def any_recorded() -> bool:
    """Whether any engine state file exists (running or not: the caller checks which answer)."""
    try:
        return any(engines_dir().glob("*.json"))
    except OSError:
        return False


def none_running_line(default_timeout: float | None = None, where: str | None = None) -> str:
    """The engine section's line when no engine runs; with a pipeline's idle timeout, what its run would start."""
    from .duration import format_duration

    line = "engine: none running"
    if default_timeout is not None:
        line += ("; 'minikafka run' starts one that stops " +
                 (f"after {format_duration(default_timeout)} unused" if default_timeout else "at the end of the run") +
                 f" ([engine] idle_timeout{' in ' + where if where else ''})")
    return line

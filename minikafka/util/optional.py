"""Optional dependencies: imported on first use, with an error naming the extra to install."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import MissingDependencyError

DISTRIBUTION = "minikafka-spark"
# the top-level module of each optional dependency and the extra that installs it
EXTRAS = {"pyspark": "spark", "great_expectations": "quality", "paho": "mqtt", "polars": "polars",
          "pandas": "pandas", "starlette": "ui", "uvicorn": "ui", "jinja2": "ui", "pyiceberg": "lake",
          "deltalake": "lake", "chispa": "testing"}


def install_command(extra: str) -> str:
    """The pip command that installs an extra, e.g. ``pip install 'minikafka-spark[spark]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def install_hint(exc: ImportError) -> str:
    """``": pip install 'minikafka-spark[spark]'"`` when ``exc`` is a missing optional dependency, else ``""``."""
    top = (getattr(exc, "name", None) or "").split(".")[0]
    return f": {install_command(EXTRAS[top])}" if top in EXTRAS else ""


def require(module: str, extra: str) -> Any:
    """Import ``module`` or raise MissingDependencyError naming ``pip install 'minikafka-spark[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(f"{module} is not installed: {install_command(extra)}") from exc

"""Optional dependencies: imported on first use, with an error naming the extra to install."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import MissingDependencyError


def require(module: str, extra: str) -> Any:
    """Import ``module`` or raise MissingDependencyError naming ``pip install minikafka[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{module} is not installed: pip install 'minikafka[{extra}]'"
        ) from exc

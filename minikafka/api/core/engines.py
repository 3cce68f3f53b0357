"""Engines the Python API hands work to (Spark), registered by the layer above.

The API never imports an engine: ``minikafka/__init__.py`` registers a loader that
imports ``minikafka.spark`` on first use, so the API stays importable without pyspark
and the import graph has no circle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import MinikafkaError

_loaders: dict[str, Callable[[], Any]] = {}


def register_engine(name: str, loader: Callable[[], Any]) -> None:
    """Register ``loader`` (returns the engine's module or object) under ``name``."""
    _loaders[name] = loader


def engine(name: str) -> Any:
    """The engine registered as ``name``.

    Raises:
        MinikafkaError: nothing is registered under ``name``.
    """
    loader = _loaders.get(name)
    if loader is None:
        raise MinikafkaError(f"no {name!r} engine is registered (import minikafka, not only minikafka.api)")
    return loader()

"""Read a TOML file, turning a missing or malformed file into the caller's error class."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


def read_toml(path: Path, error: type[Exception], what: str) -> dict[str, Any]:
    """The parsed file; ``error("<path>: <what> not found")`` or ``error("<path>: invalid TOML: ...")``."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise error(f"{path}: {what} not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: invalid TOML: {exc}") from exc

"""The one base of every run result (a stage, a pipe, ingest, backfill, delivery, work, watch...).

Each result is a dataclass that says what a run did. It inherits two views from ``Result``:

- ``as_dict()``: the fields as JSON-ready values (datetimes as ISO text, paths as text,
  nested results as dicts), what ``--json`` prints and schedulers read;
- ``summary()``: one human line (or a few), what the CLI prints at the end of a run;
  ``str(result)`` is the same text.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from decimal import Decimal
from pathlib import PurePath
from typing import Any


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data (dicts, lists, str, int, float, bool, None)."""
    if isinstance(value, Result):
        return value.as_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value) if not f.name.startswith("_")}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return value


class Result:
    """Base of the run results (each a dataclass): ``as_dict()`` and ``summary()``."""

    def as_dict(self) -> dict[str, Any]:
        """The public fields, JSON-ready (fields starting with ``_`` are left out)."""
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if not f.name.startswith("_")}

    def summary(self) -> str:
        """One line saying what the run did (subclasses word it for their kind of run)."""
        parts = [f"{k} {v}" for k, v in self.as_dict().items() if isinstance(v, (int, float, str)) and v != ""]
        return f"{type(self).__name__}: " + ", ".join(parts)

    def __str__(self) -> str:
        return self.summary()

"""Expectation suites kept as TOML files a person can read and edit.

```toml
name = "scored"                 # default: the file name
topic = "rss.scored"            # the output topic it checks (default: the stage's only output)
policy = "quarantine"           # fail | warn | quarantine

[[expect]]
type = "expect_column_values_to_not_be_null"
column = "url"

[[expect]]
type = "expect_column_values_to_match_regex"
column = "url"
regex = "^https?://"

[row_count]                     # sanity against the stage's input rows
min_ratio = 0.5
max_ratio = 1.0
```

Every key besides ``type`` is passed to the great-expectations expectation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import MinikafkaError
from ..util.tomlfile import read_toml

POLICIES = ("fail", "warn", "quarantine")
ROW_LEVEL_PREFIX = "expect_column_values_to_"


class QualityError(MinikafkaError, ValueError):
    """A suite file is invalid (names the file and expectation), or a check failed under policy 'fail'."""


@dataclass
class Expectation:
    type: str
    kwargs: dict[str, Any]

    @property
    def column(self) -> str | None:
        return self.kwargs.get("column")

    @property
    def row_level(self) -> bool:
        return self.type.startswith(ROW_LEVEL_PREFIX) and self.type != "expect_column_values_to_be_unique"

    def label(self) -> str:
        return f"{self.type}({self.column})" if self.column else self.type


@dataclass
class Suite:
    name: str
    path: Path
    topic: str | None
    policy: str
    expectations: list[Expectation] = field(default_factory=list)
    min_ratio: float | None = None
    max_ratio: float | None = None


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def expectation_class(type_name: str):
    """The great-expectations class for a snake_case expectation type (None if unknown)."""
    from . import gx_env

    gx = gx_env.import_gx()
    return getattr(gx.expectations, _camel(type_name), None)


def load_suite(path: str | Path, *, fields: dict[str, list[str]] | None = None, topic: str | None = None) -> Suite:
    """Parse and check a suite file.

    Args:
        fields: topic -> its field names; the suite's topic must be one, and every
            ``column``/``column_list`` must be one of that topic's fields.
        topic: the default topic (the stage's only output) when the file names none.

    Raises:
        QualityError: malformed file, unknown policy or expectation type, unknown column.
    """
    path = Path(path)
    raw = read_toml(path, QualityError, "suite file")
    unknown = sorted(set(raw) - {"name", "topic", "policy", "expect", "row_count", "description"})
    if unknown:
        raise QualityError(f"{path}: unknown key(s) {unknown}")
    policy = raw.get("policy", "fail")
    if policy not in POLICIES:
        raise QualityError(f"{path}: policy must be one of {POLICIES}, got {policy!r}")
    suite = Suite(raw.get("name", path.stem), path, raw.get("topic") or topic, policy)
    columns = None
    if fields is not None:
        if suite.topic is None:
            raise QualityError(f"{path}: name the topic the suite checks (topic = ...): the stage has several outputs")
        if suite.topic not in fields:
            raise QualityError(f"{path}: topic {suite.topic!r} is not an output of the stage (outputs: {sorted(fields)})")
        columns = fields[suite.topic]
    for i, spec in enumerate(raw.get("expect", [])):
        where = f"{path}: expectation #{i + 1}"
        if not isinstance(spec, dict) or "type" not in spec:
            raise QualityError(f"{where}: needs a 'type'")
        spec = dict(spec)
        type_name = spec.pop("type")
        cls = expectation_class(type_name)
        if cls is None:
            raise QualityError(f"{where}: unknown expectation type {type_name!r}")
        for col in [spec.get("column"), *spec.get("column_list", [])]:
            if col is not None and columns is not None and col not in columns:
                raise QualityError(f"{where} ({type_name}): column {col!r} is not a field of topic "
                                   f"{suite.topic!r} (fields: {columns})")
        try:
            cls(**spec)
        except Exception as exc:  # pydantic errors from great-expectations' own models
            raise QualityError(f"{where} ({type_name}): invalid arguments: {exc}") from exc
        suite.expectations.append(Expectation(type_name, spec))
    rc = raw.get("row_count")
    if rc is not None:
        suite.min_ratio, suite.max_ratio = rc.get("min_ratio"), rc.get("max_ratio")
    if not suite.expectations and rc is None:
        raise QualityError(f"{path}: the suite has no expectations")
    return suite

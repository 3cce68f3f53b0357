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

Every key besides ``type`` is passed to the great-expectations expectation. At load,
column arguments (``column``, ``column_A``, ``column_B``, ``column_list``) must name fields
of the topic's model, and ``regex``/``regex_list`` must compile as a Java regex (Spark's
engine; see ``check_regex``). Expectations see exactly the model's fields, in order.
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import QualityError
from ..util.tomlfile import read_toml

POLICIES = ("fail", "warn", "quarantine")
ROW_LEVEL_PREFIX = "expect_column_values_to_"
# arguments that name one column / several columns of the topic
COLUMN_ARGS = ("column", "column_A", "column_B")
COLUMN_LIST_ARGS = ("column_list",)
# arguments that hold a regular expression / a list of them
REGEX_ARGS = ("regex",)
REGEX_LIST_ARGS = ("regex_list",)
TOP_LEVEL_KEYS = {"name", "topic", "policy", "expect", "row_count", "description"}


def is_row_level(type_name: str) -> bool:
    """A per-row check whose failing rows can be set aside (uniqueness depends on other rows)."""
    return type_name.startswith(ROW_LEVEL_PREFIX) and type_name != "expect_column_values_to_be_unique"


@dataclass
class Expectation:
    type: str
    kwargs: dict[str, Any]

    @property
    def column(self) -> str | None:
        return self.kwargs.get("column")

    @property
    def row_level(self) -> bool:
        return is_row_level(self.type)

    def label(self) -> str:
        return expectation_label(self.type, self.kwargs)


def expectation_columns(kwargs: dict[str, Any]) -> list[str]:
    """The columns an expectation's arguments name (``column``, ``column_A``/``column_B``, ``column_list``)."""
    cols = [kwargs[a] for a in COLUMN_ARGS if isinstance(kwargs.get(a), str)]
    if not cols and isinstance(kwargs.get("column_list"), list):
        cols = [str(c) for c in kwargs["column_list"]]
    return cols


def expectation_label(type_name: str, kwargs: dict[str, Any]) -> str:
    """``type(column)``, ``type(column_A, column_B)``, ``type(a, b, c)``; the bare type without columns."""
    cols = expectation_columns(kwargs)
    return f"{type_name}({', '.join(cols)})" if cols else type_name


@dataclass
class Suite:
    name: str
    path: Path
    topic: str | None
    policy: str
    expectations: list[Expectation] = field(default_factory=list)
    min_ratio: float | None = None
    max_ratio: float | None = None
    arguments_checked: bool = True  # False: loaded with arguments=False, great-expectations checks them later


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


@functools.cache
def known_expectation_types() -> frozenset[str] | None:
    """The ``expect_*`` types great-expectations exports, read from its source without importing
    it (importing it costs seconds): the class names ``great_expectations.expectations`` imports,
    in snake_case. None when that cannot be read (then the type is checked by importing it)."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec("great_expectations")
        if spec is None or not spec.submodule_search_locations:
            return None
        init = Path(next(iter(spec.submodule_search_locations))) / "expectations" / "__init__.py"
        tree = ast.parse(init.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, ImportError):
        return None
    names = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    found = frozenset(_snake(n) for n in names if _snake(n).startswith("expect_") and _camel(_snake(n)) == n)
    return found or None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def known_type(type_name: Any) -> bool:
    """Whether ``type_name`` is a great-expectations ``expect_*`` type, without importing it when
    its source can be read (``known_expectation_types``)."""
    if not isinstance(type_name, str) or not type_name.startswith("expect_"):
        return False
    known = known_expectation_types()
    return type_name in known if known is not None else expectation_class(type_name) is not None


def expectation_class(type_name: str):
    """The great-expectations class for a snake_case ``expect_*`` type (None if unknown)."""
    from . import gx_env

    if not isinstance(type_name, str) or not type_name.startswith("expect_"):
        return None
    gx = gx_env.import_gx()
    cls = getattr(gx.expectations, _camel(type_name), None)
    if not isinstance(cls, type) or not issubclass(cls, gx.expectations.Expectation):
        return None
    return cls


# Spark matches regexes with java.util.regex; suites are checked at load with Python's re.
# ``_python_form`` walks the pattern once: it refuses what Java refuses but Python accepts
# (a '{' that is not a repetition, Python-only groups and escapes), and swaps the Java-only
# constructs Python lacks for a stand-in of the same shape, so that re.compile then catches
# the structural errors (unbalanced parentheses, nothing to repeat, bad ranges). The pattern
# Spark gets is never changed. Not a full Java parser: a rare pattern may still slip through.
_JAVA_ESCAPE_LETTERS = set("tnrfaecdDsSwWbBAGZzQpPhHvVRXNkxu0123456789")
_STAND_IN = "."  # one atom, quantifiable, like the construct it replaces


class _NotJava(ValueError):
    pass


def _python_form(pattern: str) -> str:
    out: list[str] = []
    i, n, in_class = 0, len(pattern), 0
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":  # \Q...\E quotes everything up to \E (or the end)
                stop = pattern.find("\\E", i + 2)
                out.append(re.escape(pattern[i + 2:] if stop < 0 else pattern[i + 2:stop]) or "(?:)")
                i = n if stop < 0 else stop + 2
                continue
            if not (nxt.isascii() and nxt.isalnum()):
                out.append(pattern[i:i + 2])
            elif nxt not in _JAVA_ESCAPE_LETTERS:
                raise _NotJava(f"\\{nxt} at position {i} is not a Java regex escape")
            elif nxt in "pPxN" and pattern.startswith("{", i + 2):  # \p{L}, \x{1F600}, \N{DIGIT ONE}
                stop = pattern.find("}", i + 2)
                if stop < 0:
                    raise _NotJava(f"unclosed \\{nxt}{{ at position {i}")
                out.append(_STAND_IN)
                i = stop + 1
                continue
            elif nxt in "pP":  # \pL
                out.append(_STAND_IN)
                i += 3
                continue
            elif nxt == "c":  # \cA
                out.append(_STAND_IN)
                i += 3
                continue
            elif nxt == "k":  # \k<name>
                m = re.match(r"<([A-Za-z][A-Za-z0-9]*)>", pattern[i + 2:])
                if not m:
                    raise _NotJava(f"\\k at position {i} must name a group: \\k<name>")
                out.append(f"(?P={m.group(1)})")
                i += 2 + m.end()
                continue
            elif nxt in "123456789" or nxt in "eGhHRVXz":  # back references Java allows unmatched; Java-only
                out.append(_STAND_IN)
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if ch == "[":
                in_class += 1  # Java nests classes: [a-z&&[^b]]
            elif ch == "]" and pattern[i - 1] not in "[^":
                in_class -= 1
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_class = 1
            out.append(ch)
            if pattern.startswith("^", i + 1):
                out.append("^")
                i += 1
            if pattern.startswith("]", i + 1):  # a leading ']' is literal, as in Python
                out.append("]")
                i += 1
            i += 1
            continue
        if ch == "{":
            m = re.match(r"\{\d+(?:,\d*)?\}", pattern[i:])
            if not m:
                raise _NotJava(f"'{{' at position {i} must start a repetition like {{2}} or {{2,5}} "
                               "(write \\{ for a literal brace)")
            out.append(m.group(0))
            i += m.end()
            continue
        if pattern.startswith("(?", i):
            rest = pattern[i + 2:]
            named = re.match(r"<([A-Za-z][A-Za-z0-9]*)>", rest)
            flags = re.match(r"[idmsuxU]*(?:-[idmsuxU]*)?([:)])", rest)
            if rest[:1] in (":", "=", "!", ">") or rest[:2] in ("<=", "<!"):
                out.append("(?")
                i += 2
            elif named:
                out.append(f"(?P<{named.group(1)}>")
                i += 2 + named.end()
            elif flags and flags.end() > 1:  # (?i) or (?i:...): Python wants global flags first, so drop them
                out.append("(?:" if flags.group(1) == ":" else "")
                i += 2 + flags.end()
            else:
                raise _NotJava(f"'(?{rest[:2]}' at position {i} is not Java regex syntax (groups are "
                               "(?:...), (?<name>...) with a name of letters and digits, lookarounds, flags like (?i))")
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def check_regex(pattern: Any) -> str | None:
    """Why ``pattern`` cannot be a Spark (Java) regex, or None.

    Java-only constructs (``\\p{L}``, ``(?<name>...)``, ``\\k<name>``, ``\\Q...\\E``, ``\\h``,
    ``\\z``, nested classes, flags mid-pattern) are accepted; Python-only ones (``(?P<name>...)``,
    ``(?#...)``, ``\\U0001F600``, a literal ``{``) are refused, then Python's ``re`` compiles the rest.
    """
    if not isinstance(pattern, str):
        return f"must be a string, got {type(pattern).__name__} {pattern!r}"
    try:
        form = _python_form(pattern)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FutureWarning on Java's nested class syntax
            re.compile(form)
    except _NotJava as exc:
        return f"invalid regex {pattern!r}: {exc} (Spark matches with Java regex)"
    except re.error as exc:
        return f"invalid regex {pattern!r}: {exc} (checked with Python's re; Spark matches with Java regex)"
    return None


def _arguments(where: str, spec: dict[str, Any], single: tuple[str, ...], lists: tuple[str, ...],
               what: str) -> list[tuple[str, Any]]:
    """(label, value) of every argument in ``single`` and of every item of the lists in ``lists``."""
    found: list[tuple[str, Any]] = [(arg, spec[arg]) for arg in single if arg in spec]
    for arg in lists:
        if arg in spec:
            value = spec[arg]
            if not isinstance(value, list) or not value:
                raise QualityError(f"{where}: {arg!r} must be a non-empty list of {what}, got {value!r}")
            found += [(f"{arg}[{i}]", item) for i, item in enumerate(value)]
    return found


def _check_arguments(where: str, spec: dict[str, Any], columns: list[str] | None, topic: str | None) -> None:
    """Column arguments are strings naming the topic's fields; regex arguments compile."""
    named = _arguments(where, spec, COLUMN_ARGS, COLUMN_LIST_ARGS, "column names")
    for arg, col in named:
        if not isinstance(col, str):
            raise QualityError(f"{where}: {arg!r} must be a column name (a string), got {col!r}")
        if columns is not None and col not in columns:
            raise QualityError(f"{where}: {arg} {col!r}: column {col!r} is not a field of topic {topic!r} "
                               f"(fields: {columns})")
    patterns = _arguments(where, spec, REGEX_ARGS, REGEX_LIST_ARGS, "regular expressions")
    for arg, pattern in patterns:
        problem = check_regex(pattern)
        if problem:
            raise QualityError(f"{where}: {arg}: {problem}")


def load_suite(path: str | Path, *, fields: dict[str, list[str]] | None = None, topic: str | None = None,
               arguments: bool = True) -> Suite:
    """Parse and check a suite file.

    Every check but one runs without importing great-expectations (a few seconds): the
    expectation types are read from its source (``known_expectation_types``). The arguments'
    own check (great-expectations' pydantic models) runs here when ``arguments`` is True, else
    where the suite runs (``check_arguments``: a command that only reads the pipeline, such as
    ``status --pipeline``, never imports great-expectations).

    Args:
        fields: topic -> its field names; the suite's topic must be one, and every column
            argument (``column``, ``column_A``, ``column_B``, ``column_list``) must be one of
            that topic's fields.
        topic: the default topic (the stage's only output) when the file names none.

    Raises:
        QualityError: malformed file, unknown policy or expectation type, unknown column,
            invalid regex (``regex``, ``regex_list``); the message names the file, the
            expectation (number and type) and the argument.
    """
    path = Path(path)
    raw = read_toml(path, QualityError, "suite file")
    unknown = sorted(set(raw) - TOP_LEVEL_KEYS)
    if unknown:
        raise QualityError(f"{path}: unknown key(s) {unknown} (known: {sorted(TOP_LEVEL_KEYS)})")
    for key in ("name", "topic", "description"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key]):
            raise QualityError(f"{path}: {key!r} must be a non-empty string, got {raw[key]!r}")
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
    specs = raw.get("expect", [])
    if not isinstance(specs, list):
        raise QualityError(f"{path}: 'expect' must be an array of tables ([[expect]] sections), "
                           f"got {type(specs).__name__}")
    for i, spec in enumerate(specs):
        where = f"{path}: expectation #{i + 1}"
        if not isinstance(spec, dict):
            raise QualityError(f"{where}: must be a table ([[expect]] with type = ...), got {spec!r}")
        if "type" not in spec:
            raise QualityError(f"{where}: needs a 'type'")
        spec = dict(spec)
        type_name = spec.pop("type")
        if not known_type(type_name):
            raise QualityError(f"{where}: unknown expectation type {type_name!r} (a great-expectations "
                               "expect_* type such as 'expect_column_values_to_not_be_null')")
        _check_arguments(f"{where} ({type_name})", spec, columns, suite.topic)
        suite.expectations.append(Expectation(type_name, spec))
    rc = raw.get("row_count")
    if rc is not None:
        suite.min_ratio, suite.max_ratio = _row_count(path, rc)
    if not suite.expectations and rc is None:
        raise QualityError(f"{path}: the suite has no expectations")
    suite.arguments_checked = False
    if arguments:
        check_arguments(suite)
    return suite


def check_arguments(suite: Suite) -> Suite:
    """Have great-expectations check each expectation's arguments (its own pydantic models);
    once per suite. What ``load_suite(..., arguments=False)`` left for where the suite runs.

    Raises:
        QualityError: ``FILE: expectation #N (TYPE): invalid arguments: ...``, as ``load_suite``
            says it.
    """
    if suite.arguments_checked:
        return suite
    for i, e in enumerate(suite.expectations):
        where = f"{suite.path}: expectation #{i + 1}"
        cls = expectation_class(e.type)
        if cls is None:
            raise QualityError(f"{where}: unknown expectation type {e.type!r} (a great-expectations "
                               "expect_* type such as 'expect_column_values_to_not_be_null')")
        try:
            cls(**e.kwargs)
        except Exception as exc:  # pydantic errors from great-expectations' own models
            raise QualityError(f"{where} ({e.type}): invalid arguments: {_one_line(exc)}") from exc
    suite.arguments_checked = True
    return suite


def _one_line(exc: Exception) -> str:
    """A pydantic error as ``arg: problem; arg: problem``; other errors as their text."""
    errors = getattr(exc, "errors", None)
    try:
        items = errors() if callable(errors) else None
    except Exception:  # not a pydantic error after all
        items = None
    if not items:
        return " ".join(str(exc).split())
    return "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())) or 'arguments'}: {e.get('msg')}" for e in items)


def _row_count(path: Path, rc: Any) -> tuple[float | None, float | None]:
    if not isinstance(rc, dict):
        raise QualityError(f"{path}: 'row_count' must be a table ([row_count] with min_ratio/max_ratio), got {rc!r}")
    unknown = sorted(set(rc) - {"min_ratio", "max_ratio"})
    if unknown:
        raise QualityError(f"{path}: [row_count]: unknown key(s) {unknown} (known: ['max_ratio', 'min_ratio'])")
    if not rc:
        raise QualityError(f"{path}: [row_count]: give min_ratio, max_ratio or both")
    for key, value in rc.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise QualityError(f"{path}: [row_count]: {key} must be a number >= 0, got {value!r}")
    low, high = rc.get("min_ratio"), rc.get("max_ratio")
    if low is not None and high is not None and low > high:
        raise QualityError(f"{path}: [row_count]: min_ratio {low} is above max_ratio {high}")
    return low, high

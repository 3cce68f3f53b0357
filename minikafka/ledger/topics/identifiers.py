"""Validation and quoting of every name that becomes an SQL identifier."""

from __future__ import annotations

import re

from ...errors import InvalidNameError

# Topic names may carry dots and dashes ("rss.items"); they never start with "_" so they
# cannot collide with the ledger's own tables, which all start with "_minikafka".
TOPIC_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,127}$")
# Field names are Python identifiers that do not start with "_" (reserved for metadata).
FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,127}$")
CONSUMER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")


def quote_identifier(name: str) -> str:
    """Quote ``name`` for use as an SQLite identifier (doubling embedded quotes).

    Raises:
        InvalidNameError: if the name is empty or holds a NUL character.
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise InvalidNameError(f"invalid SQL identifier: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def _check(pattern: re.Pattern[str], kind: str, name: object, rule: str) -> str:
    if not isinstance(name, str) or not pattern.match(name):
        raise InvalidNameError(f"invalid {kind} name {name!r}: {rule}")
    return name


# Table names SQLite keeps for itself ("object name reserved for internal use"): no topic
# may take them, in any case. The ledger's own tables start with '_', which TOPIC_NAME
# already refuses as a first character.
LEDGER_PREFIX = "_minikafka_"  # the ledger's own tables, indexes and triggers start with it

RESERVED_TOPIC_PREFIXES = {"sqlite_": "SQLite reserves names starting with 'sqlite_' for its own tables"}


def validate_topic_name(name: object) -> str:
    """Return ``name`` if it is a valid topic name, else raise InvalidNameError.

    Names starting with ``sqlite_`` (any case) are reserved, and so is ``sqlite`` itself
    (its index ``sqlite__new`` would be); ``_minikafka*`` cannot start with a letter.
    """
    _check(
        TOPIC_NAME, "topic", name,
        "use 1-128 characters: letters, digits, '_', '.', '-', starting with a letter",
    )
    for prefix, why in RESERVED_TOPIC_PREFIXES.items():
        # the topic's indexes are named NAME__new, NAME__dedup...: "sqlite" alone is reserved too
        if (name + "__").lower().startswith(prefix):
            raise InvalidNameError(
                f"invalid topic name {name!r}: {why} (any case; the topic's table and its indexes "
                f"{name}__new, {name}__dedup... would be one); choose another name")
    return name


def validate_field_name(name: object, *, model: str = "") -> str:
    """Return ``name`` if it is a valid column name for a model field."""
    where = f" on model {model}" if model else ""
    return _check(
        FIELD_NAME, f"field{where}", name,
        "use 1-128 characters: letters, digits and '_', starting with a letter",
    )


def validate_consumer_name(name: object) -> str:
    """Return ``name`` if it is a valid consumer name."""
    return _check(
        CONSUMER_NAME, "consumer", name,
        "use 1-128 characters: letters, digits, '_', '.', ':', '-', starting with a letter or digit",
    )

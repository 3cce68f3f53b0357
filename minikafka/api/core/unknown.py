"""Incoming fields a topic's model does not know: never dropped silently.

A pydantic model ignores an unknown field by default (``extra="ignore"``), so a field a
producer added upstream would vanish without a trace. Each topic has a policy
(``unknown_fields``, dlt's evolve/freeze/discard):

- ``drop`` (the default): the row is stored without the field and a warning names the
  field and how many rows carried it (once per ingest; once per field for Python appends);
- ``quarantine``: the row is refused: ``ingest`` sends it to the topic's quarantine with a
  reason naming the field, a Python append raises ``UnknownFieldError``;
- ``evolve``: the field is kept; only a model that takes extra fields (``extra="allow"``)
  can. The first row carrying a new field gives the topic a nullable column for it, typed
  from that value (``keep_fields``, O(1), in the row's transaction); later values are
  checked against that type; the model reads the field back as an extra.

A model with ``extra="forbid"`` refuses such a row itself (quarantined by ``ingest``).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from ...errors import InvalidSettingError, UnknownFieldError

POLICIES = ("drop", "quarantine", "evolve")
log = logging.getLogger("minikafka")


def check_policy(topic: str, policy: str, model: type[BaseModel]) -> str:
    """``policy`` when it is one of POLICIES and fits ``model``.

    Raises:
        InvalidSettingError: an unknown policy, or "evolve" for a model that drops extra fields.
    """
    if policy not in POLICIES:
        raise InvalidSettingError(f"topic {topic!r}: unknown_fields must be one of {', '.join(POLICIES)}, "
                                  f"got {policy!r}")
    if policy == "evolve" and model.model_config.get("extra") != "allow":
        raise InvalidSettingError(
            f'topic {topic!r}: unknown_fields = "evolve" needs a model with extra="allow" ({model.__name__} drops '
            'unknown fields): add the field to the model and run minikafka evolve, or use "drop" or "quarantine"')
    return policy


def watched(model: type[BaseModel]) -> bool:
    """Whether unknown fields of ``model``'s rows need a policy: the model ignores them, or
    keeps them on the instance (``extra="allow"``) where the topic's columns do not."""
    return model.model_config.get("extra", "ignore") != "forbid"


@lru_cache(maxsize=256)
def known_names(model: type[BaseModel]) -> frozenset[str]:
    """The keys a row of ``model`` may carry: field names and their aliases."""
    names = set()
    for name, info in model.model_fields.items():
        names.add(name)
        for alias in (info.alias, info.validation_alias):
            if isinstance(alias, str):
                names.add(alias)
    return frozenset(names)


def unknown_of(model: type[BaseModel], data: Any) -> list[str]:
    """The keys of a dict row that are no field of ``model`` (sorted; [] for anything else)."""
    if not isinstance(data, dict):
        return []
    known = known_names(model)
    return sorted(k for k in data if k not in known)


@lru_cache(maxsize=256)
def forbidding(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` refusing extra fields: the fast JSON path's validator, so a line with a
    field the model lacks takes the exact path, where the policy applies."""
    return type(model.__name__, (model,), {"model_config": {**model.model_config, "extra": "forbid"},
                                          "__module__": model.__module__, "__qualname__": model.__qualname__})


def refusal(topic: str, names: list[str]) -> str:
    """The reason a row with unknown fields is refused (quarantine)."""
    shown = ", ".join(repr(n) for n in names)
    return (f"unknown field{'s' if len(names) > 1 else ''} {shown}: topic {topic!r} has no such field "
            '(unknown_fields = "quarantine"; add it to the model and run minikafka evolve to keep it)')


def warning(topic: str, counts: dict[str, int]) -> str:
    """The warning of dropped fields: each field and how many rows carried it."""
    shown = ", ".join(f"{n!r} ({c} row{'s' if c != 1 else ''})" for n, c in sorted(counts.items()))
    return (f"topic {topic!r}: dropped unknown field(s) {shown} (unknown_fields = \"drop\"): the model has no "
            "such field; add it to the model and run minikafka evolve to keep it, or set unknown_fields = "
            '"quarantine" to refuse such rows')


class UnknownFields:
    """A topic's policy applied to Python appends (``Topic.append``/``extend`` of dicts)."""

    def __init__(self, topic: str, model: type[BaseModel], policy: str = "drop"):
        self.topic = topic
        self.model = model
        self.policy = check_policy(topic, policy, model)
        self.active = watched(model)
        self.keeps = self.policy == "evolve"  # extra fields get columns (keep_fields)
        self.warned: set[str] = set()

    def check(self, rows) -> None:
        """Apply the policy to dict rows before they are validated.

        Raises:
            UnknownFieldError: policy "quarantine" and a row with an unknown field (nothing written).
        """
        if not self.active or self.keeps:
            return
        counts: dict[str, int] = {}
        for r, data in enumerate(rows):
            names = unknown_of(self.model, data)
            if not names:
                continue
            if self.policy == "quarantine":
                where = f"row {r}: " if len(rows) > 1 else ""
                raise UnknownFieldError(f"{where}{refusal(self.topic, names)}")
            for n in names:
                counts[n] = counts.get(n, 0) + 1
        new = {n: c for n, c in counts.items() if n not in self.warned}
        if new:
            self.warned.update(new)
            log.warning(warning(self.topic, new))


def allows_extra(model: type[BaseModel]) -> bool:
    """Whether ``model`` keeps extra fields on its instances (``extra="allow"``)."""
    return model.model_config.get("extra") == "allow"


def keep_fields(rows, conn, models) -> bool:
    """``unknown_fields = "evolve"``: give each extra field of ``models`` the topic does not
    store yet a nullable column (typed from its first non-null value), in the open
    transaction ``conn``; ``rows`` encode them from then on. A rollback takes the columns
    back out of ``rows``' layout too.

    Returns:
        Whether columns were added (encoded values of the models must be encoded again).

    Raises:
        InvalidRecordError: a field name that cannot be a column name (a bad row).
    """
    from ...errors import InvalidRecordError, MinikafkaError
    from ...ledger.topics import evolution

    layout = rows.layout
    known = set(layout.field_names)
    new: dict[str, Any] = {}
    for model in models:
        for name, value in (model.__pydantic_extra__ or {}).items():
            if name not in known and new.get(name) is None:
                new[name] = value
    if not new:
        return False
    try:
        columns = [evolution.infer_column(name, value) for name, value in new.items()]
    except MinikafkaError as exc:
        raise InvalidRecordError(f"topic {rows.name!r}: cannot keep field ({exc})") from None
    before = len(layout.columns)

    def refresh() -> None:
        rows.encode = layout.encoder()
        rows.decode = layout.decoder()

    def undo() -> None:
        del layout.columns[before:]
        layout.add_columns([])
        refresh()

    evolution.add_kept_fields_in_current_transaction(conn, layout, columns)
    rows.ledger.on_rollback(undo)
    refresh()
    log.info("topic %r: kept new field(s) %s in column(s) of their own (unknown_fields = \"evolve\")",
             rows.name, ", ".join(f"{c.name!r} ({c.kind})" for c in columns))
    return True

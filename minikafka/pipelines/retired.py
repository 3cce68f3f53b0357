"""Consumers of a pipeline's topics that no stage of the pipeline declares any more.

A renamed or removed stage leaves its consumer registered: every row stays 'new' until
it acks, and each ack of the others adds a row for it. ``run``, ``plan``, ``status`` and
``consumers`` name such consumers with the command that drops them.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import LedgerError
from ..ledger.consuming import registered
from ..ledger.transactions import connect_read_only
from .definition import PipelineDefinition


def used_consumers(defn: PipelineDefinition) -> set[tuple[str, str]]:
    """(topic, consumer) pairs the pipeline file declares: its stages' inputs, its deliveries' groups."""
    used = {(t, s.consumer) for s in defn.stages for t in s.inputs}
    if not defn.has_deliveries:  # the HTTP client is imported only when there are deliveries
        return used
    try:
        from ..connectors.delivery import load_deliveries

        used |= {(d.topic, d.name) for d in load_deliveries(defn.path).deliveries}
    except Exception:  # noqa: BLE001 - no [[deliveries]] in the file (already checked at load)
        pass
    return used


def retired_consumers(defn: PipelineDefinition, conn: sqlite3.Connection | None = None) -> list[tuple[str, str]]:
    """Registered (topic, consumer) of the pipeline's topics that the pipeline does not declare.

    Without ``conn`` the ledger is opened read-only; a missing or empty ledger has none.
    """
    if conn is None:
        if not Path(defn.source).is_file():
            return []
        try:
            ro = connect_read_only(str(defn.source), busy_timeout=5)
        except LedgerError:
            return []
        try:
            return retired_consumers(defn, ro)
        except sqlite3.Error:
            return []
        finally:
            ro.close()
    try:
        pairs = registered(conn, list(defn.topics))
    except sqlite3.OperationalError:  # no consumer table yet
        return []
    used = used_consumers(defn)
    return [p for p in pairs if p not in used]


def shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)


def retired_messages(defn: PipelineDefinition, conn: sqlite3.Connection | None = None, *,
                     topic: str | None = None) -> list[str]:
    """One line per retired consumer (of ``topic``, or of every topic), with the command that drops it."""
    where = shown_path(defn.path)
    return [f"consumer {name!r} of {t} is not in {where}: drop it with "
            f"`minikafka consumers {t} --drop {name} --pipeline {where}`"
            for t, name in retired_consumers(defn, conn) if topic is None or t == topic]

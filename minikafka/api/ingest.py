"""Append a JSONL file to a topic from plain Python (no Spark): the feed-fetcher step.

Every line is validated on its own: malformed JSON and rows the model rejects go to
the quarantine with their line number and reason; the valid rows are appended in one
transaction, duplicates of the dedup key skipped. Re-running on the same file writes
nothing new (for topics with dedup fields).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ..errors import InvalidRecordError
from ..util.clock import utc_now
from .topic import Topic


@dataclass
class IngestResult:
    lines: int = 0
    appended: int = 0
    duplicates: int = 0
    quarantined: int = 0


def ingest_jsonl(topic: Topic, path: str | Path) -> IngestResult:
    """Validate and append every line of ``path`` (``.gz`` read as gzip) to ``topic``."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    result = IngestResult()
    valid = []
    bad: list[tuple[int, str, str]] = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            result.lines += 1
            try:
                model = topic._validate(json.loads(line))
                topic._encode(model)  # refuses what the ledger cannot store (NaN inside JSON, ...)
                valid.append(model)
            except InvalidRecordError as exc:
                bad.append((number, line.strip(), str(exc)))
            except json.JSONDecodeError as exc:
                bad.append((number, line.strip(), f"malformed JSON: {exc}"))
            except ValidationError as exc:
                reason = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                bad.append((number, line.strip(), f"invalid row: {reason}"))
    source = topic.source
    now = utc_now()
    with source._ledger.atomic() as conn:
        known = {
            r[0] for r in conn.execute(
                "SELECT origin FROM _minikafka_quarantine WHERE topic = ? AND origin LIKE ?",
                (topic.name, f"{path.name}:%"))
        }
        for number, text, reason in bad:
            origin = f"{path.name}:{number}"
            if origin in known:
                continue
            conn.execute(
                "INSERT INTO _minikafka_quarantine (topic, payload, reason, origin, created_at) VALUES (?, ?, ?, ?, ?)",
                (topic.name, text[:10000], reason, origin, now))
            result.quarantined += 1
        result.appended = topic._insert_many_in_current_transaction(valid, ignore_duplicates=bool(topic.dedup))
    result.duplicates = len(valid) - result.appended
    return result

"""Topic.migrate: every row rewritten under a new model in one transaction."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from minikafka import MigrationError, SchemaMismatchError, Source
from tests.conftest import Cleaned


class CleanedV2(BaseModel):
    creator: str
    url: str
    duration_min: int
    quality: str = "unknown"


def upgrade(old: Cleaned) -> CleanedV2:
    return CleanedV2(**old.model_dump(), quality="unknown")


def fill(t, n=3):
    t.extend([{"creator": "c", "url": f"u{i}", "duration_min": i} for i in range(n)])


def test_migrate_keeps_ids_status_and_dedup(db_path):
    with Source(db_path) as src:
        v1 = src.topic("cleaned", Cleaned, dedup=("url",))
        fill(v1)
        v1.set_handled(2)
        v2 = v1.migrate(CleanedV2, upgrade)
        assert [(r.id, r.status, r.data.quality) for r in v2.iter_new(records=True)] == [
            (1, "new", "unknown"), (3, "new", "unknown")]
        assert v2.count("handled") == 1
        v2.append({"creator": "c", "url": "u9", "duration_min": 9})
        assert max(r.id for r in v2.iter_new(records=True)) == 4
        with pytest.raises(SchemaMismatchError, match="migrated"):
            v1.append({"creator": "c", "url": "u10", "duration_min": 1})
    with Source(db_path) as src:
        with pytest.raises(SchemaMismatchError):
            src.topic("cleaned", Cleaned, dedup=("url",))
        assert src.topic("cleaned", CleanedV2, dedup=("url",)).count() == 4


def test_migration_failing_half_way_changes_nothing(source):
    v1 = source.topic("cleaned", Cleaned, dedup=("url",))
    fill(v1, 5)

    def breaks(old):
        if old.url == "u3":
            raise RuntimeError("cannot convert")
        return upgrade(old)

    with pytest.raises(MigrationError, match="at record 4.*cannot convert"):
        v1.migrate(CleanedV2, breaks)
    assert v1.count() == 5 and next(v1.iter_new()).url == "u0"
    info = [r[1] for r in source._ledger.conn.execute('PRAGMA table_info("cleaned")')]
    assert "quality" not in info
    assert source._ledger.conn.execute(
        "SELECT count(*) FROM sqlite_schema WHERE name LIKE '%migrating%'").fetchone() == (0,)


def test_migration_producing_duplicates_fails_atomically(source):
    v1 = source.topic("cleaned", Cleaned, dedup=("url",))
    fill(v1, 2)
    with pytest.raises(MigrationError, match="UNIQUE"):
        v1.migrate(CleanedV2, lambda o: {**o.model_dump(), "url": "same"})
    assert v1.count() == 2


def test_new_model_must_keep_dedup_fields(source):
    class NoUrl(BaseModel):
        creator: str

    v1 = source.topic("cleaned", Cleaned, dedup=("url",))
    with pytest.raises(SchemaMismatchError, match="url"):
        v1.migrate(NoUrl, lambda o: {"creator": o.creator})


def test_migrate_accepts_dicts(source):
    v1 = source.topic("cleaned", Cleaned, dedup=("url",))
    fill(v1, 1)
    v2 = v1.migrate(CleanedV2, lambda o: {**o.model_dump(), "quality": "good"})
    assert next(v2.iter_new()).quality == "good"
